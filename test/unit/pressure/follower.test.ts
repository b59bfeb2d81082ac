/**
 * The gateway's pressure follower, in process: a fake store (a key map and a channel the
 * test publishes on) and an injected clock, so staleness is driven by the test's time, not
 * by waiting for it. Only the follower's own evaluation tick is real (every 5 ms here), and
 * each wait for a state has a deadline.
 */
import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { FastifyBaseLogger } from 'fastify';
import { GatewayConfigSchema } from '../../../src/config/schema.js';
import { MultiplierBoard } from '../../../src/pressure/follower/board.js';
import { PressureFollower } from '../../../src/pressure/follower/follower.js';
import { PRESSURE_CHANNEL, encodeReport, pressureKey } from '../../../src/pressure/report.js';
import type { PressureReport } from '../../../src/pressure/report.js';
import type { KeyValue, Store, Subscription } from '../../../src/store/index.js';
import { LearnedBudgets } from '../../../src/pressure/budget/learned.js';

const SILENT = { debug: () => undefined } as unknown as FastifyBaseLogger;

/** Keys the test sets, and the one channel the follower listens on. */
class FakeStore implements Pick<Store, 'kv' | 'subscribe'> {
  readonly keys = new Map<string, string>();
  keyReads = 0;
  private listener: ((message: string) => void) | undefined;
  readonly kv = {
    get: (key: string) => {
      this.keyReads++;
      return Promise.resolve(this.keys.get(key) ?? null);
    },
  } as unknown as KeyValue;

  subscribe(channel: string, onMessage: (message: string) => void): Promise<Subscription> {
    assert.equal(channel, PRESSURE_CHANNEL);
    this.listener = onMessage;
    return Promise.resolve({
      close: () => {
        this.listener = undefined;
        return Promise.resolve();
      },
    });
  }

  publish(report: PressureReport): void {
    this.listener?.(encodeReport(report));
  }

  /** Any text on the channel, as Valkey would deliver it. */
  publishRaw(text: string): void {
    this.listener?.(text);
  }
}

function report(seq: number, ts: number, m: number, node = 'relay-a'): PressureReport {
  return { node, m, u: 0.9, uhat: 0.9, mode: 'normal', seq, ts, law: 'lead' };
}

async function until(what: string, holds: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!holds()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

describe('pressure follower', { timeout: 30_000 }, () => {
  let follower: PressureFollower | undefined;
  afterEach(async () => follower?.stop());

  function start(
    store: FakeStore,
    clock: { now: number },
    observed: number[] = [],
    learned?: LearnedBudgets,
  ) {
    const pressure = GatewayConfigSchema.shape.pressure.parse({
      enabled: true,
      staleAfterMs: 1000,
      holdMs: 1000,
      freshReportsToTrust: 1,
      // Rises as fast as drops: what is asserted here is which report wins, not the ramp.
      rampUpPerSec: 1000,
      evaluateMs: 5,
    });
    const board = new MultiplierBoard(['relay-a'], () => clock.now);
    follower = new PressureFollower(
      pressure,
      board,
      store,
      SILENT,
      (s) => observed.push(s),
      () => clock.now,
      learned,
    );
    return { board, started: follower.start() };
  }

  it('applies live reports, newest only, and measures their propagation', async () => {
    const store = new FakeStore();
    const clock = { now: 1_000_000 };
    const observed: number[] = [];
    const { board, started } = start(store, clock, observed);
    await started;
    store.publish(report(1, clock.now - 20, 0.7));
    assert.equal(board.get('relay-a').feedState, 'fresh');
    assert.deepEqual(observed, [0.02]);
    clock.now += 10; // the rise from the cold start's safe value is applied on the next tick
    await until('0.7 applied', () => board.get('relay-a').value === 0.7);
    // An older report (a reordered or replayed message) changes nothing; a lower newer one
    // applies at once (drops are never delayed).
    store.publish(report(0, clock.now - 500, 0.2));
    assert.equal(board.get('relay-a').value, 0.7);
    store.publish(report(2, clock.now, 0.4));
    assert.equal(board.get('relay-a').value, 0.4);
    // Another node's report is ignored.
    store.publish(report(3, clock.now, 0.1, 'relay-z'));
    assert.equal(board.get('relay-a').value, 0.4);
    assert.equal(observed.length, 2, 'only the accepted live reports were measured');
  });

  it('holds a silent feed, then moves to the safe value, re-reading its key meanwhile', async () => {
    const store = new FakeStore();
    const clock = { now: 2_000_000 };
    const { board, started } = start(store, clock);
    await started;
    store.publish(report(1, clock.now, 0.9));
    const readsBefore = store.keyReads;
    clock.now += 1500; // past staleAfterMs: held at its last value
    await until('holding', () => board.get('relay-a').feedState === 'holding');
    assert.equal(board.get('relay-a').value, 0.9);
    assert.ok(store.keyReads > readsBefore, 'a stale feed has its key re-read');
    clock.now += 1500; // past the hold: the safe value, never above the last fresh one
    await until('safe', () => board.get('relay-a').feedState === 'safe');
    assert.equal(board.get('relay-a').value, 0.5);
    // The feed's key holds a fresh report (its message was lost): read back, trusted again.
    store.keys.set(pressureKey('relay-a'), encodeReport(report(7, clock.now, 0.3)));
    clock.now += 1100; // the next repair is due once staleAfterMs has passed again
    await until('fresh from the key', () => board.get('relay-a').feedState === 'fresh');
    assert.equal(board.get('relay-a').value, 0.3);
  });

  it('takes the budget a feed learned; a malformed one is dropped, the last good one kept', async () => {
    const store = new FakeStore();
    const clock = { now: 3_000_000 };
    const learned = new LearnedBudgets();
    const { board, started } = start(store, clock, [], learned);
    await started;
    const budget = { points: 32, bytesPerSec: 1_048_576 };
    store.publish({ ...report(1, clock.now, 0.8), budget });
    assert.deepEqual(learned.get('relay-a'), { ...budget, ts: clock.now });
    // Garbage in the budget: the report's m counts, the budget is ignored (never removed).
    for (const [i, bad] of [
      { points: -5, bytesPerSec: 1000 },
      { points: 1e12, bytesPerSec: 1000 },
      { points: 1.5, bytesPerSec: 1000 },
      { points: 10, bytesPerSec: 'lots' },
      'NaN',
      null,
    ].entries()) {
      // Lower each time: drops apply at once.
      const m = 0.4 - i * 0.05;
      const text = JSON.stringify({ ...report(2 + i, clock.now + i + 1, m), budget: bad });
      store.publishRaw(text);
      assert.equal(board.get('relay-a').value, m, `m of report ${i} applied`);
      assert.equal(learned.get('relay-a')?.points, 32, `budget ${JSON.stringify(bad)} ignored`);
    }
    // A report without one keeps it too; and so does a stale feed (the multiplier goes safe).
    store.publish(report(20, clock.now + 20, 0.05));
    assert.equal(learned.get('relay-a')?.points, 32);
    clock.now += 5000;
    await until('safe', () => board.get('relay-a').feedState === 'safe');
    assert.equal(learned.get('relay-a')?.points, 32);
    // Not JSON at all: nothing changes, nothing throws.
    store.publishRaw('{"node":"relay-a","budget":');
    assert.equal(learned.get('relay-a')?.points, 32);
  });
});
