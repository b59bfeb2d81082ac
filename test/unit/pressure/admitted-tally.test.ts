/**
 * The gateway's tally of writes forwarded per node (pressure/budget/admitted-tally.ts): the
 * hot path touches memory only; a flush sends one addition per node that had writes, however
 * many writes there were; a failed flush keeps its counts for the next.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { AdmittedTally } from '../../../src/pressure/budget/admitted-tally.js';

describe('admitted tally', () => {
  it('batches: one addition per node per flush, never one per write', async () => {
    const calls: [string, number, number][] = [];
    const tally = new AdmittedTally(
      {
        add: (node, bytes, points) => {
          calls.push([node, bytes, points]);
          return Promise.resolve();
        },
      },
      ['relay-a', 'relay-b'],
    );
    for (let i = 0; i < 10_000; i++) tally.note('relay-a', 32_800, 1);
    tally.note('relay-z', 5, 5); // not a configured node: ignored
    assert.equal(calls.length, 0, 'nothing is sent by note()');
    await tally.flush();
    assert.deepEqual(calls, [['relay-a', 328_000_000, 10_000]]);
    await tally.flush();
    assert.equal(calls.length, 1, 'a node with nothing new sends nothing');
  });

  it('keeps what a failed flush could not send', async () => {
    let fail = true;
    const sent: number[] = [];
    const errors: unknown[] = [];
    const tally = new AdmittedTally(
      {
        add: (_node, bytes) => {
          if (fail) return Promise.reject(new Error('valkey down'));
          sent.push(bytes);
          return Promise.resolve();
        },
      },
      ['relay-a'],
      (err) => errors.push(err),
    );
    tally.note('relay-a', 100, 1);
    await tally.flush();
    tally.note('relay-a', 50, 1);
    fail = false;
    await tally.flush();
    assert.deepEqual(sent, [150]);
    assert.equal(errors.length, 1);
  });
});
