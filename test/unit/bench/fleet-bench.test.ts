/**
 * `sluice bench fleet`'s set-up, in process: the writers start balanced under sticky routing
 * (two per node), so a mode is judged by how it routes around the sick node and not by an
 * uneven start. Its command line's refusals: test/integration/fleet-bench.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { balancedSources, formatFleetTable } from '../../../src/bench/fleet.js';
import type { FleetModeResult } from '../../../src/bench/fleet.js';
import { UpstreamPool } from '../../../src/gateway/upstreams.js';
import { makeIdentity } from '../../../src/quota/policy.js';

describe('bench fleet', { timeout: 60_000 }, () => {
  it('puts two of six writers on each node under sticky routing, each its own client', () => {
    const ids = ['relay-a', 'relay-b', 'relay-c'];
    const pool = new UpstreamPool(
      ids.map((id, i) => ({ id, url: `http://127.0.0.1:${7000 + i}` })),
      'sticky',
      { path: '/healthz', intervalMs: 1000, timeoutMs: 500, failuresToDown: 2 },
      { info: () => undefined, warn: () => undefined },
    );
    const sources = balancedSources(6);
    assert.equal(new Set(sources).size, 6, 'six distinct addresses');
    const nodes = sources.map(
      (ip) => pool.pick(makeIdentity('ip', ip, 'default', 'sluice-bench-fleet').key)!.id,
    );
    assert.deepEqual(nodes, [...ids, ...ids]);
  });

  it('names every answer other than 2xx and 429 in its table', () => {
    const result = {
      mode: 'headroom',
      headroomBytes: 24 * 1024 * 1024,
      degradeFactor: 0.125,
      acceptedShareOfSustainable: 0.97,
      acceptedInWindowPerSec: 136.6,
      sustainableAfterPerSec: 140.9,
      intoMemoryPerSec: 7,
      acceptedPerNodePerSec: [60, 61, 15.6],
      sickPeakOverTarget: 0.8,
      healthyPeakOverTarget: 0.9,
      clientErrors: 3,
      answers: { limited429: 12, other: { 502: 1 }, shed503: 1, errors: 1, notSent: 0 },
    } as unknown as FleetModeResult;
    const row = formatFleetTable([result]).split('\n')[2]!;
    assert.match(
      row,
      /^\| 24 MiB \| 0\.125 \| headroom \| 0\.97 \(136\.6 of 140\.9\/s\) \| 0\.05 \| 0\.92 \|/,
    );
    assert.match(row, /\| 12 \| 3 \(1 x 502, 1 x 503 at m = 0, 1 connection errors\) \| 0 \|$/);
  });
});
