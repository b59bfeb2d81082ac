import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { PROJECT_ROOT, venvDir } from '../../src/harness/paths.js';
import { measuredRun, readRunResult, runScript } from '../helpers/scripts.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'sluice-run-benchmark-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const runBenchmark = (env: Record<string, string>) => runScript('run-benchmark.sh', [], env);

describe('run-benchmark.sh', { timeout: 300_000 }, () => {
  it('measures a 2-second light run through iovalkey and writes a complete result', async () => {
    const r = await measuredRun({
      REQUEST_TYPE: 'light',
      RATE_LIMITER_TYPE: 'iovalkey',
      KEYS: '500',
      OUTPUT_FILE: path.join(dir, 'light.json'),
    });
    assert.equal(r.schema, 'sluice-bench-run/1');
    assert.equal(r.config.implementation, 'iovalkey');
    assert.equal(r.config.mode, 'standalone');
    assert.equal(r.config.durationSec, 2);
    assert.equal(r.config.keys, 500);
    const c = r.counts!;
    assert.ok(c.requests > 100, `only ${c.requests} requests`);
    // The load generator's CPU, apart from the processes under test.
    assert.ok(r.loadGenerator!.cpuMs > 0 && r.loadGenerator!.cpuMsPerRequest! > 0);
    assert.equal(c.requests, c.ok2xx + c.limited429 + c.otherNon2xx);
    assert.equal(c.limited429, 0, '500 identities at 100 writes/s each are never limited here');
    // Rates come from counts over the measured wall time, not from bytes.
    assert.ok(r.wallSeconds! >= 1.9 && r.wallSeconds! < 4, `wall ${r.wallSeconds}`);
    assert.equal(r.rates!.requestsPerSec, c.requests / r.wallSeconds!);
    const l = r.latencyMs!;
    assert.ok(l.p50 <= l.p90 && l.p90 <= l.p99 && l.p99 <= l.max, JSON.stringify(l));
    // Every process under test, sampled on its own; never the load generator.
    const roles = r.processes.map((p) => p.role).sort();
    assert.deepEqual(roles, ['gateway', 'relay', 'valkey']);
    for (const p of r.processes) {
      assert.ok(p.samples.length >= 5, `${p.name}: ${p.samples.length} samples`);
      assert.notEqual(p.pid, process.pid);
    }
    const gateway = r.processes.find((p) => p.role === 'gateway')!;
    assert.ok(gateway.cpuPercent.mean! > 5);
    // CPU per request, stated per process: the window's CPU time over its responses.
    assert.ok(gateway.cpuMs! > 0);
    assert.equal(gateway.cpuMsPerRequest, Number((gateway.cpuMs! / c.requests).toFixed(4)));
    // One script call per write: the quota is one round trip (warm-up not counted).
    const v = r.valkey!;
    assert.ok(Math.abs(v.scriptCallsPerRequest! - 1) < 0.05, JSON.stringify(v));
    assert.equal((r.clientSettings as { client: string }).client, 'iovalkey');
    assert.ok(r.versions.valkey && r.versions['rate-limiter-flexible'] === '11.4.0');
  });

  it('floods through glide on the cluster: the over-limit share is rejected, mostly from memory', async () => {
    const out = path.join(dir, 'flood');
    const r = await measuredRun(
      {
        REQUEST_TYPE: 'flood',
        RATE_LIMITER_TYPE: 'valkey-glide:cluster',
        KEYS: '200',
        FLOOD_SHARE: '0.5',
        RESULTS_DIR: out,
      },
      path.join(out, 'valkey-glide_cluster_flood_10c_2s_run1.json'),
    );
    const share = r.counts!.limited429 / r.counts!.requests;
    assert.ok(share > 0.4 && share < 0.6, `429 share ${share}`);
    // Flooders are blocked in memory: about half the writes never reach Valkey.
    assert.ok(r.valkey!.scriptCallsPerRequest! < 0.65, JSON.stringify(r.valkey));
    const valkeys = r.processes.filter((p) => p.role === 'valkey');
    assert.equal(valkeys.length, 6);
    assert.equal(valkeys.filter((p) => p.name.includes('(primary)')).length, 3);
  });

  it('measures the peer baseline on the same Valkey', async () => {
    const r = await measuredRun({
      WARMUP: '0',
      RATE_LIMITER_TYPE: 'fastify-rate-limit',
      KEYS: '500',
      OUTPUT_FILE: path.join(dir, 'peer.json'),
    });
    assert.equal(r.processes.find((p) => p.role === 'peer')?.name, 'peer');
    assert.ok(r.valkey!.scriptCallsPerRequest! > 0.9, JSON.stringify(r.valkey));
  });

  it('refuses bad settings with a clear message and writes nothing', async () => {
    const file = path.join(dir, 'bad.json');
    const refusals: [Record<string, string>, RegExp][] = [
      [{ RATE_LIMITER_TYPE: 'redis' }, /unknown implementation "redis"/],
      [
        { RATE_LIMITER_TYPE: 'fastify-rate-limit', REQUEST_TYPE: 'flood' },
        /peer baseline runs the light and heavy workloads only/,
      ],
      // nostr-rs-relay speaks Nostr only; the relay alone is a Nostr baseline only.
      [{ RELAY_IMPL: 'nostr-rs-relay', REQUEST_TYPE: 'light' }, /nostr-rs-relay only speaks Nostr/],
      [
        { RATE_LIMITER_TYPE: 'relay-alone', REQUEST_TYPE: 'light' },
        /relay-alone measures the Nostr relay by itself/,
      ],
    ];
    for (const [settings, message] of refusals) {
      const { status, output } = await runBenchmark({
        ...settings,
        DURATION: '2',
        OUTPUT_FILE: file,
      });
      assert.equal(status, 1, output);
      assert.match(output, message);
      assert.equal(existsSync(file), false);
    }
  });

  it('measures Nostr through iovalkey with new events, nothing refused', async () => {
    const r = await measuredRun({
      CONNECTIONS: '8',
      REQUEST_TYPE: 'nostr',
      RATE_LIMITER_TYPE: 'iovalkey',
      FRESH_EVENTS_PER_SEC: '4000',
      OUTPUT_FILE: path.join(dir, 'nostr.json'),
    });
    assert.equal(r.counts!.limited429, 0);
    assert.equal(r.config.quota.points, 1_000_000);
    assert.equal(r.events!.duplicates, 0);
    assert.ok(r.events!.sent >= r.counts!.requests);
    // The sender's quota and the author's: 2 script calls per new event (plus the seen-ids
    // SET NX, which is no script).
    assert.ok(Math.abs(r.valkey!.scriptCallsPerRequest! - 2) < 0.05, JSON.stringify(r.valkey));
    assert.ok((r.valkey!.commands.set ?? 0) >= r.counts!.requests, JSON.stringify(r.valkey));
  });

  it('holds every author at its limit (nostr-at-limit): nothing stored past it, with and without leases', async () => {
    // Few authors, so that each reaches its limit of 10 within the run even on a loaded
    // machine (40 authors in 3 s once stored too few for any to reach it, at a load of 6).
    const authors = 16;
    for (const impl of ['iovalkey', 'iovalkey+lease', 'valkey-glide+lease:cluster']) {
      const r = await measuredRun({
        CONNECTIONS: '8',
        DURATION: '4',
        REQUEST_TYPE: 'nostr-at-limit',
        RATE_LIMITER_TYPE: impl,
        AUTHORS: String(authors),
        FRESH_EVENTS_PER_SEC: '4000',
        OUTPUT_FILE: path.join(dir, `at-limit-${impl.replace(/[+:]/g, '-')}.json`),
      });
      const p = r.pastLimit!;
      assert.equal(p.authorLimit, 10, impl);
      // Every author sent past its quota and got exactly it.
      assert.equal(p.authors, authors, impl);
      assert.equal(p.authorsAtLimit, authors, `${impl}: ${JSON.stringify(p)}`);
      assert.equal(p.maxStored, 10, impl);
      assert.equal(p.authorsOverAdmitted, 0, impl);
      assert.equal(p.senderOverAdmitted, 0, impl);
      assert.ok(r.counts!.limited429 > r.counts!.ok2xx, `${impl}: ${JSON.stringify(r.counts)}`);
      if (r.leases) assert.equal(r.leases.overAdmitted, 0, impl);
    }
  });

  it('marks a run failed, with the reason, when the relay it is given is gone', async () => {
    const file = path.join(dir, 'gone.json');
    const { status } = await runBenchmark({
      DURATION: '2',
      RATE_LIMITER_TYPE: 'ioredis',
      RELAY_URL: 'http://127.0.0.1:9',
      OUTPUT_FILE: file,
    });
    assert.equal(status, 2);
    const r = readRunResult(file);
    assert.equal(r.status, 'failed');
    assert.ok(r.failureReasons.length > 0);
    assert.equal(r.counts, null);
  });

  it('writes files the report reads: each keeps the contract the report checks', () => {
    const files = readdirSync(dir).filter((f) => f.endsWith('.json'));
    assert.ok(files.length >= 4, files.join(', '));
    const check = [
      'import sys',
      'sys.path.insert(0, "scripts")',
      'from pathlib import Path',
      'from sluice_report.load import Unreadable, load_file',
      'bad = [(f, r.reason) for f in sys.argv[1:] if isinstance(r := load_file(Path(f)), Unreadable)]',
      'print(bad)',
      'sys.exit(1 if bad else 0)',
    ].join('\n');
    const python = path.join(venvDir(), 'bin', 'python');
    const r = spawnSync(python, ['-c', check, ...files.map((f) => path.join(dir, f))], {
      cwd: PROJECT_ROOT,
      encoding: 'utf8',
      timeout: 60_000,
    });
    assert.equal(r.status, 0, `${r.stdout}${r.stderr}`);
  });
});
