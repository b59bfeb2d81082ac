import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseProcStat, parseVmRss } from '../../../src/bench/run/proc-sampler.js';
import { commandDelta, parseCommandStats } from '../../../src/bench/run/valkey-stats.js';
import { failureReasons } from '../../../src/bench/run/runner.js';
import type { RunConfig } from '../../../src/bench/run/config.js';
import type { LoadResult } from '../../../src/bench/run/http-load.js';

describe('benchmark measurement', { timeout: 60_000 }, () => {
  it('reads CPU ticks past a command name holding spaces and parentheses', () => {
    const stat = '1234 (node (x) y) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0';
    assert.equal(parseProcStat(stat), 300);
    assert.equal(parseVmRss('Name:\tnode\nVmRSS:\t  2048 kB\n'), 2 * 1024 * 1024);
  });

  it('counts commands per request, script round trips apart', () => {
    const text = [
      '# Commandstats',
      'cmdstat_evalsha:calls=110,usec=900,usec_per_call=8.1,rejected_calls=0,failed_calls=0',
      'cmdstat_incrby:calls=110,usec=90,usec_per_call=0.8',
      'cmdstat_info:calls=9,usec=90,usec_per_call=10',
      'cmdstat_replconf:calls=30,usec=90,usec_per_call=3',
    ].join('\r\n');
    const after = parseCommandStats(text);
    assert.deepEqual(after, { evalsha: 110, incrby: 110, info: 9, replconf: 30 });
    // The harness's own INFO and replication between nodes are not the load's doing.
    const d = commandDelta({ evalsha: 10, incrby: 10, info: 1, replconf: 2 }, after, 100);
    assert.deepEqual(d.commands, { evalsha: 100, incrby: 100 });
    assert.equal(d.calls, 200);
    assert.equal(d.perRequest, 2);
    assert.equal(d.scriptCallsPerRequest, 1);
    assert.equal(commandDelta({}, {}, 0).perRequest, null);
  });

  it('fails a run with errors, stray statuses, or 429s where none belong', () => {
    const load = (counts: Partial<LoadResult['counts']>): LoadResult => ({
      wallSeconds: 2,
      latencyMs: null,
      counts: {
        requests: 100,
        ok2xx: 100,
        limited429: 0,
        otherNon2xx: 0,
        errors: 0,
        timeouts: 0,
        otherStatuses: {},
        ...counts,
      },
    });
    const on = { implementation: 'iovalkey' } as RunConfig;
    const off = { implementation: 'quotas-off' } as RunConfig;
    assert.deepEqual(failureReasons(on, load({})), []);
    assert.deepEqual(failureReasons(on, load({ limited429: 30, ok2xx: 70 })), []);
    assert.deepEqual(failureReasons(off, load({ limited429: 30, ok2xx: 70 })), [
      '30 rate-limited answers with quotas off',
    ]);
    assert.deepEqual(failureReasons(on, load({ otherNon2xx: 3, otherStatuses: { '502': 3 } })), [
      '3 responses with status 502',
    ]);
    assert.deepEqual(failureReasons(on, load({ errors: 2 })), ['2 connection errors or timeouts']);
    assert.deepEqual(failureReasons(on, load({ requests: 0, ok2xx: 0 })), ['no responses']);
  });
});
