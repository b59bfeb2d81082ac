/** The ready line: what every long-running sluice process prints once it serves. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseReadyLine, readyLine } from '../../../src/util/ready-line.js';

describe('ready line', { timeout: 5_000 }, () => {
  it('reads back what a process printed', () => {
    const info = {
      ready: 'gateway' as const,
      url: 'http://127.0.0.1:4000',
      admin: 'http://127.0.0.1:4001',
      workers: [12, 13],
    };
    assert.deepEqual(parseReadyLine(readyLine(info)), info);
  });

  it('is not found in log lines, other JSON, or a ready line without a URL', () => {
    for (const line of [
      '{"level":30,"msg":"server listening","url":"http://127.0.0.1:4000"}',
      'sluice gateway ready: http://127.0.0.1:4000',
      '{"ready":"gateway"}',
      '{"ready":"gateway","url":',
      '{"ready":"nobody","url":"http://127.0.0.1:4000"}',
    ]) {
      assert.equal(parseReadyLine(line), undefined, line);
    }
  });
});
