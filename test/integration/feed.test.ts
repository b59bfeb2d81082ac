import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { PRESSURE_CHANNEL, decodeReport, pressureKey } from '../../src/pressure/report.js';
import type { PressureReport } from '../../src/pressure/report.js';
import { createStore } from '../../src/store/index.js';
import type { Store } from '../../src/store/index.js';
import { parsePrometheusValue } from '../../src/pressure/feed/samplers.js';
import { sluice } from '../helpers/cli.js';
import { matrix, nodesFor, storeOptions } from '../helpers/env.js';
import { spawnSluice, startFeed, startRelay } from '../helpers/processes.js';
import type { RelayProcess } from '../helpers/processes.js';

const MiB = 1024 * 1024;
const FIXTURES = path.resolve(import.meta.dirname, '../../../test/fixtures');
const valkeyNodes = () =>
  nodesFor('standalone')
    .map((n) => `${n.host}:${n.port}`)
    .join(',');

/** Wait until `key` is gone (its lease lapsed), failing with its value after `timeoutMs`. */
async function untilGone(store: Store, key: string, why: string, timeoutMs = 5000) {
  const deadline = Date.now() + timeoutMs;
  let value = await store.kv.get(key);
  while (value !== null && Date.now() < deadline) {
    await sleep(100);
    value = await store.kv.get(key);
  }
  assert.equal(value, null, why);
}

describe('sluice feed', { timeout: 120_000 }, () => {
  let relay: RelayProcess;
  before(async () => {
    relay = await startRelay({ nodeId: 'fed' });
  });
  after(async () => {
    await relay.stop();
  });

  for (const { client, mode } of matrix()) {
    it(`${client} on ${mode}: publishes a leased report and a message every tick`, async () => {
      const node = `fed-${client}-${mode}-${Date.now()}`;
      const received: PressureReport[] = [];
      const store = await createStore(storeOptions(client, mode));
      const sub = await store.subscribe(PRESSURE_CHANNEL, (text) => {
        const r = decodeReport(text);
        if (r?.node === node) received.push(r);
      });
      try {
        const feed = await startFeed({
          nodeId: node,
          relayUrl: relay.url,
          targetBytes: '1GiB',
          tickMs: 200,
          client,
          mode,
        });
        try {
          const deadline = Date.now() + 5000;
          while (received.length < 3 && Date.now() < deadline) await sleep(50);
          assert.ok(received.length >= 3, `received ${received.length} reports`);
          const seqs = received.map((r) => r.seq);
          assert.deepEqual(
            seqs,
            [...seqs].sort((a, b) => a - b),
            'seq increases',
          );
          const last = received.at(-1)!;
          // An idle relay far below a 1 GiB target: no pressure.
          assert.equal(last.m, 1);
          assert.equal(last.mode, 'normal');
          assert.ok(last.u > 0 && last.u < 0.5, `u ${last.u}`);
          assert.equal(last.law, 'lead');
          const stored = decodeReport(await store.kv.get(pressureKey(node)));
          assert.equal(stored?.node, node);
        } finally {
          assert.equal(await feed.stop(), 0);
        }
        // The lease is three ticks (600 ms): a dead feed's key disappears on its own.
        await untilGone(store, pressureKey(node), 'the lease of a stopped feed lapses');
      } finally {
        // Open Valkey clients would keep this file's process alive after a failure.
        await sub.close();
        await store.close();
      }
    });
  }

  it('keeps running when its source fails mid-run: counts errors, stops publishing, the lease lapses', async () => {
    const node = `fed-failing-${Date.now()}`;
    const victim = spawn('sleep', ['60'], { stdio: 'ignore' });
    const store = await createStore(storeOptions('ioredis', 'standalone'));
    // Stopped whatever fails below: an open store client would keep this file running.
    const feed = await spawnSluice([
      'feed',
      '--node-id',
      node,
      '--pid',
      String(victim.pid),
      '--target-bytes',
      '1GiB',
      '--tick-ms',
      '200',
      '--valkey-client',
      'ioredis',
      '--valkey-nodes',
      nodesFor('standalone')
        .map((n) => `${n.host}:${n.port}`)
        .join(','),
    ]).catch(async (err: unknown) => {
      victim.kill('SIGKILL');
      await store.close();
      throw err;
    });
    try {
      assert.ok(
        decodeReport(await store.kv.get(pressureKey(node))),
        'publishing while the source is readable',
      );
      victim.kill('SIGKILL');
      await once(victim, 'exit');
      await untilGone(store, pressureKey(node), 'no fresh value, so the lease ran out');
      const metrics = await (await fetch(`${feed.url}/metrics`)).text();
      assert.match(metrics, /sluice_feed_sample_errors_total [1-9]/);
      assert.equal((await fetch(`${feed.url}/healthz`)).status, 200, 'the feed is still running');
      assert.match(feed.output(), /memory sample failed/);
    } finally {
      victim.kill('SIGKILL');
      await feed.stop();
      await store.close();
    }
  });

  it('refuses to start on an unreadable source, saying which', () => {
    const res = sluice(
      [
        'feed',
        '--node-id',
        'x',
        '--pid',
        String(2 ** 22 + 7),
        '--target-bytes',
        '1GiB',
        '--valkey-nodes',
        nodesFor('standalone')
          .map((n) => `${n.host}:${n.port}`)
          .join(','),
      ],
      process.env,
    );
    assert.notEqual(res.status, 0);
    assert.match(res.stderr, /cannot read \/proc\/\d+\/status/);
  });

  it('asks for exactly one source', () => {
    const res = sluice(['feed', '--node-id', 'x', '--target-bytes', '1GiB'], process.env);
    assert.notEqual(res.status, 0);
    assert.match(res.stderr, /exactly one source/);
  });

  it("--cgroup with --target-fraction: u is the reading over that share of the group's limit", async () => {
    const node = `fed-cgroup-${Date.now()}`;
    const store = await createStore(storeOptions('ioredis', 'standalone'));
    try {
      // A real v1 group's files (limit 160 MiB, 41598976 bytes in use, no inactive file).
      const feed = await spawnSluice([
        'feed',
        '--node-id',
        node,
        '--cgroup',
        path.join(FIXTURES, 'cgroup-v1/oom-killed'),
        '--target-fraction',
        '0.5',
        '--tick-ms',
        '200',
        '--valkey-client',
        'ioredis',
        '--valkey-nodes',
        valkeyNodes(),
      ]);
      try {
        const report = decodeReport(await store.kv.get(pressureKey(node)));
        assert.ok(report, 'published');
        assert.ok(Math.abs(report.u - 41598976 / (80 * MiB)) < 1e-9, `u ${report.u}`);
      } finally {
        assert.equal(await feed.stop(), 0);
      }
    } finally {
      await store.close();
    }
  });

  it('asks for exactly one target, and a fraction only of a cgroup with a limit', () => {
    const feed = (...args: string[]) =>
      sluice(['feed', '--node-id', 'x', '--valkey-nodes', valkeyNodes(), ...args], process.env);
    const v1 = path.join(FIXTURES, 'cgroup-v1/oom-killed');
    const cases: [string[], RegExp][] = [
      [['--cgroup', v1], /exactly one target: --target-bytes or --target-fraction/],
      [
        ['--cgroup', v1, '--target-bytes', '1GiB', '--target-fraction', '0.5'],
        /exactly one target/,
      ],
      [['--pid', String(process.pid), '--target-fraction', '0.5'], /give it with --cgroup/],
      [['--cgroup', v1, '--target-fraction', '0'], /not a fraction of the limit/],
      [['--cgroup', v1, '--target-fraction', '1.5'], /not a fraction of the limit/],
      [
        ['--cgroup', path.join(FIXTURES, 'cgroup-v2/unlimited'), '--target-fraction', '0.8'],
        /has no memory limit.*give --target-bytes/,
      ],
    ];
    for (const [args, expected] of cases) {
      const res = feed(...args);
      assert.notEqual(res.status, 0, args.join(' '));
      assert.match(res.stderr, expected, args.join(' '));
    }
  });

  it('samples fast under pressure, publishes changes and a heartbeat, and the key never lapses', async () => {
    // A v2 group's files in a scratch directory: the test moves memory.current, the feed
    // reads it as it would the kernel's. Limit 256 MiB, target 0.5 of it: u = current / 128 MiB.
    const dir = mkdtempSync(path.join(tmpdir(), 'sluice-feed-pace-'));
    cpSync(path.join(FIXTURES, 'cgroup-v2/limited'), dir, { recursive: true });
    const stat = path.join(dir, 'memory.stat');
    writeFileSync(stat, 'anon 0\nfile 0\ninactive_file 0\nactive_file 0\n');
    const setU = (u: number) =>
      writeFileSync(path.join(dir, 'memory.current'), `${Math.round(u * 128 * MiB)}\n`);
    setU(0.3);
    const node = `fed-pace-${Date.now()}`;
    const store = await createStore(storeOptions('ioredis', 'standalone'));
    let feed: Awaited<ReturnType<typeof spawnSluice>> | undefined;
    try {
      feed = await spawnSluice([
        'feed',
        '--node-id',
        node,
        '--cgroup',
        dir,
        '--target-fraction',
        '0.5',
        '--tick-ms',
        '500',
        '--fast-tick-ms',
        '50',
        '--fast-above',
        '0.7',
        '--valkey-client',
        'ioredis',
        '--valkey-nodes',
        valkeyNodes(),
      ]);
      const metricsUrl = `${feed.url}/metrics`;
      const metrics = async () => {
        const text = await (await fetch(metricsUrl)).text();
        const get = (name: string) => parsePrometheusValue(text, name) ?? NaN;
        return {
          tick: get('sluice_feed_tick_seconds'),
          samples: get('sluice_feed_samples_total'),
          publishes: get('sluice_feed_publishes_total'),
        };
      };
      // The key is polled throughout: it must never be missing, whatever the pace does.
      let lapses = 0;
      let polling = true;
      const watcher = (async () => {
        while (polling) {
          if ((await store.kv.get(pressureKey(node))) === null) lapses++;
          await sleep(25);
        }
      })();
      const until = async (
        what: string,
        ok: (m: Awaited<ReturnType<typeof metrics>>) => boolean,
      ) => {
        const deadline = Date.now() + 10_000;
        let m = await metrics();
        while (!ok(m) && Date.now() < deadline) {
          await sleep(25);
          m = await metrics();
        }
        assert.ok(ok(m), `${what}: ${JSON.stringify(m)}`);
        return m;
      };
      try {
        await until('slow at rest', (m) => m.tick === 0.5);
        setU(0.9);
        const fastFrom = await until('fast under pressure', (m) => m.tick === 0.05);
        // Once the law's filter has caught up with u = 0.9 (six seconds, four of its time
        // constants), forty samples: the multiplier barely moves, so mostly heartbeats go out.
        const settled = await until('120 fast samples', (m) => m.samples >= fastFrom.samples + 120);
        const later = await until('40 more samples', (m) => m.samples >= settled.samples + 40);
        const published = later.publishes - settled.publishes;
        const sampled = later.samples - settled.samples;
        assert.ok(published >= 1, 'a heartbeat at least once per slow tick');
        assert.ok(published <= sampled / 4, `${published} publications for ${sampled} samples`);
        const report = decodeReport(await store.kv.get(pressureKey(node)));
        assert.ok(report && report.u > 0.85 && report.m < 1, `report ${JSON.stringify(report)}`);
        setU(0.3);
        await until('slow again', (m) => m.tick === 0.5);
        const slowFrom = await metrics();
        const slowLater = await until('4 slow samples', (m) => m.samples >= slowFrom.samples + 4);
        assert.ok(
          slowLater.publishes - slowFrom.publishes >= 3,
          'at the slow pace every tick publishes',
        );
      } finally {
        polling = false;
        await watcher;
      }
      assert.equal(lapses, 0, 'the leased key never lapsed across the pace changes');
    } finally {
      await feed?.stop();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
