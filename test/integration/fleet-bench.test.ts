/** `sluice bench fleet` through its command line: bad flags are refused with a clear message. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { sluice } from '../helpers/cli.js';

describe('bench fleet', { timeout: 60_000 }, () => {
  it('refuses an unknown routing mode and a run too short to measure', () => {
    const bad = sluice(['bench', 'fleet', '--modes', 'sticky,fastest'], process.env);
    assert.notEqual(bad.status, 0);
    assert.match(bad.stderr, /"fastest" is not a routing mode \(sticky, round-robin, headroom\)/);
    const short = sluice(
      ['bench', 'fleet', '--valkey', '127.0.0.1:1', '--seconds', '30', '--degrade-at', '20'],
      process.env,
    );
    assert.notEqual(short.status, 0);
    assert.match(short.stderr, /leaves no measured window/);
  });
});
