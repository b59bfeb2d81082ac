import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { CLIENT_KINDS, TOPOLOGIES } from '../../../src/store/options.js';
import { WORKLOADS, WORKLOAD_SPECS, runFileName } from '../../../src/bench/run/config.js';
import type { WorkloadSpec } from '../../../src/bench/run/config.js';
import { QUICK, plan, planLines } from '../../../src/bench/run/plan.js';
import type {
  PlanEntry,
  PlanOptions,
  PlannedRun,
  PlannedSession,
} from '../../../src/bench/run/plan.js';
import { PROJECT_ROOT } from '../../../src/harness/paths.js';

/*
 * The plan of a benchmark session (what run-all.sh runs), in process: which runs, in which
 * order, with which settings. run-all.test.ts shows that run-all.sh runs exactly this.
 */

const runsOf = (entries: PlanEntry[]) => entries.filter((e): e is PlannedRun => e.kind === 'run');
const sessionOf = (entries: PlanEntry[]) => entries[0] as PlannedSession;
const keyOf = (r: PlannedRun) => `${r.target} ${r.workload} ${r.connections}c ${r.durationSec}s`;
const configurations = (o: PlanOptions) => new Set(runsOf(plan(o)).map(keyOf));
const spec = (w: string): WorkloadSpec => WORKLOAD_SPECS[w as keyof typeof WORKLOAD_SPECS];

describe('bench plan', { timeout: 10_000 }, () => {
  it('quick runs each client x topology x workload once, each law and variant once, short', () => {
    const entries = plan({ quick: true });
    const runs = runsOf(entries);
    const count = (pred: (r: PlannedRun) => boolean) => runs.filter(pred).length;
    const plain = WORKLOADS.filter((w) => !spec(w).once && !spec(w).firstClientOnly);
    assert.deepEqual(plain, [
      'light',
      'heavy',
      'flood',
      'nostr',
      'nostr-long-tail',
      'nostr-at-limit',
    ]);
    for (const client of CLIENT_KINDS) {
      for (const mode of TOPOLOGIES) {
        for (const workload of plain) {
          const n = count(
            (r) => r.implementation === client && r.mode === mode && r.workload === workload,
          );
          assert.equal(n, 1, `${client} ${mode} ${workload}: ${n} runs`);
        }
      }
    }
    // The laws and the Nostr variants, once each, through the first client (reads beside the
    // relay alone: see below).
    for (const w of WORKLOADS.filter((x) => spec(x).once || spec(x).firstClientOnly)) {
      const those = runs.filter((r) => r.workload === w && r.implementation !== 'relay-alone');
      assert.deepEqual(
        those.map((r) => r.target),
        ['valkey-glide'],
        `${w}: ${those.map(keyOf).join(', ')}`,
      );
    }
    // Leases once per topology; each baseline once, the relay alone too.
    for (const mode of TOPOLOGIES) {
      assert.equal(
        count((r) => r.implementation.endsWith('+lease') && r.mode === mode),
        1,
        mode,
      );
    }
    for (const baseline of ['quotas-off', 'fastify-rate-limit']) {
      assert.deepEqual(
        runs.filter((r) => r.implementation === baseline).map((r) => r.mode),
        ['standalone'],
        baseline,
      );
    }
    // The relay alone once for each workload whose ratios divide by it: the repeat writers'
    // events, the long tail's (a key each) and the pages that reads ask for.
    assert.deepEqual(
      runs
        .filter((r) => r.implementation === 'relay-alone')
        .map((r) => `${r.mode} ${r.workload}`)
        .sort(),
      ['standalone nostr', 'standalone nostr-long-tail', 'standalone nostr-reads'],
    );
    assert.equal(runs.length, 3 * 2 * 6 + 3 + 3 + 2 + 4 + 2);
    // Short, once, and the session says so.
    for (const r of runs) {
      assert.equal(r.runs, 1);
      assert.equal(r.durationSec, spec(r.workload).once ? QUICK.adaptiveDurationSec : 2, keyOf(r));
      assert.equal(r.env.WARMUP, '0');
      assert.equal(r.env.KEYS, String(QUICK.keys));
    }
    const session = sessionOf(entries);
    assert.equal(session.total, runs.length);
    assert.equal(session.configurations, runs.length);
    assert.deepEqual(session.needs, ['standalone', 'cluster', 'relay-light', 'relay-heavy']);
    assert.equal(entries.filter((e) => e.kind === 'command').length, 0);
  });

  it('--clients and --workload filter, beside --quick or not', () => {
    const iovalkey = runsOf(plan({ quick: true, clients: 'iovalkey', workload: 'flood,nostr' }));
    assert.deepEqual(iovalkey.map(keyOf).sort(), [
      'iovalkey flood 50c 2s',
      'iovalkey nostr 50c 2s',
      'iovalkey nostr-at-limit 50c 2s',
      'iovalkey nostr-gateway-verified 50c 2s',
      'iovalkey nostr-long-tail 50c 2s',
      'iovalkey nostr-reads 50c 2s',
      'iovalkey nostr-relay-verified 50c 2s',
      'iovalkey nostr-sender-only 50c 2s',
      'quotas-off nostr 50c 2s',
      'relay-alone nostr 50c 2s',
      'relay-alone nostr-long-tail 50c 2s',
      'relay-alone nostr-reads 50c 2s',
    ]);
    // Options given beside --quick win over its settings.
    const longer = runsOf(
      plan({ quick: true, clients: 'ioredis:cluster', workload: 'light', runs: 2 }),
    );
    assert.equal(longer.length, 2 * 3); // the client, quotas-off and the peer, twice
    assert.ok(longer.every((r) => r.mode === 'cluster' && r.runs === 2));
    // nostr names its variants too; without baselines the relay alone stays (Nostr ratios
    // divide by it).
    const nostr = { clients: 'cluster', concurrency: [10], durationMode: 'custom:5' };
    assert.deepEqual(
      [...configurations({ ...nostr, workload: 'nostr', baselines: false })].sort(),
      [
        'ioredis:cluster nostr 10c 5s',
        'ioredis:cluster nostr-at-limit 10c 5s',
        'ioredis:cluster nostr-long-tail 10c 5s',
        'iovalkey:cluster nostr 10c 5s',
        'iovalkey:cluster nostr-at-limit 10c 5s',
        'iovalkey:cluster nostr-long-tail 10c 5s',
        'relay-alone nostr 10c 5s',
        'relay-alone nostr-long-tail 10c 5s',
        'relay-alone nostr-reads 10c 5s',
        'valkey-glide:cluster nostr 10c 5s',
        'valkey-glide:cluster nostr-at-limit 10c 5s',
        'valkey-glide:cluster nostr-gateway-verified 10c 5s',
        'valkey-glide:cluster nostr-long-tail 10c 5s',
        'valkey-glide:cluster nostr-reads 10c 5s',
        'valkey-glide:cluster nostr-relay-verified 10c 5s',
        'valkey-glide:cluster nostr-sender-only 10c 5s',
      ],
    );
    // A variant by its name: that one alone.
    assert.deepEqual(
      [...configurations({ ...nostr, workload: 'nostr-sender-only' })],
      ['valkey-glide:cluster nostr-sender-only 10c 5s'],
    );
    assert.throws(() => plan({ clients: 'redis' }), /--clients: unknown client 'redis'/);
    assert.throws(() => plan({ clients: 'quotas-off' }), /unknown client 'quotas-off'/);
    assert.throws(() => plan({ workload: 'lite' }), /--workload: unknown workload 'lite'/);
    assert.throws(() => plan({ durationMode: 'custom:0' }), /custom:N needs a positive N/);
    assert.throws(
      () => plan({ workload: 'nostr,light', relayImpl: 'nostr-rs-relay' }),
      /only speaks Nostr .* the light workload needs the reference relay/,
    );
    // Per connection count: 6 clients, each at the limit and on the long tail too, the relay
    // alone (repeat writers and long tail), 3 variants, quotas-off on each topology (repeat
    // writers and long tail); reads through the first client, the relay alone and quotas-off
    // on each topology; 2 counts, 3 runs.
    assert.equal(
      runsOf(plan({ workload: 'nostr', relayImpl: 'nostr-rs-relay' })).length,
      (6 + 6 + 6 + 2 + 3 + 2 + 2 + 4) * 2 * 3,
    );
  });

  it('the full matrix: every configuration each round in a seeded order, adaptive once', () => {
    const entries = plan({ workload: 'everything' });
    const runs = runsOf(entries);
    const rounds = [1, 2, 3].map((n) => runs.filter((r) => r.run === n));
    const first = rounds[0]!.map(keyOf);
    // 6 clients x 2 concurrencies x (light, heavy, flood, nostr, nostr-long-tail,
    // nostr-at-limit), the baselines, the relay alone (twice) and three variants per
    // concurrency, reads (the first client, the relay alone, quotas-off twice), three laws.
    assert.equal(new Set(first).size, first.length);
    assert.equal(first.length, 6 * 2 * 6 + 2 * (4 + 4 + 2 + 2) + 2 * (2 + 3) + 2 * 4 + 3);
    for (const later of rounds.slice(1)) {
      const keys = later.map(keyOf);
      assert.deepEqual([...keys].sort(), first.filter((k) => !/adaptive/.test(k)).sort());
      assert.notDeepEqual(
        keys,
        first.filter((k) => !/adaptive/.test(k)),
      );
    }
    assert.equal(sessionOf(entries).total, runs.length);
    // Dynamic durations: 120 s up to 100 connections, +30 s on the cluster; laws 180 s.
    const d = (key: string) => runs.find((r) => keyOf(r).startsWith(key))?.durationSec;
    assert.equal(d('iovalkey light 100c'), 120);
    assert.equal(d('iovalkey:cluster light 100c'), 150);
    assert.equal(d('valkey-glide adaptive-pid'), 180);
    // The same seed, the same order; another seed, another.
    assert.deepEqual(runsOf(plan({ workload: 'everything' })).map(keyOf), runs.map(keyOf));
    assert.notDeepEqual(
      runsOf(plan({ workload: 'everything', seed: 2 })).map(keyOf),
      runs.map(keyOf),
    );
    // The commands follow the runs: fleet through the first client.
    assert.deepEqual(
      entries.filter((e) => e.kind === 'command'),
      [
        { kind: 'command', command: 'fleet', client: 'valkey-glide' },
        { kind: 'command', command: 'spike' },
        { kind: 'command', command: 'step' },
      ],
    );
  });

  it("each run's environment is what run-benchmark.sh takes, variants by name", () => {
    const runs = runsOf(plan({ quick: true, rate: 900 }));
    const byKey = (w: string, t = 'valkey-glide') =>
      runs.find((r) => r.workload === w && r.target === t)!;
    assert.deepEqual(byKey('nostr-sender-only').env, {
      RATE_LIMITER_TYPE: 'valkey-glide',
      REQUEST_TYPE: 'nostr-sender-only',
      CONNECTIONS: '50',
      DURATION: '2',
      WARMUP: '0',
      RUN: '1',
      RUNS: '1',
      KEYS: '500',
      FRESH_EVENTS_PER_SEC: '1500',
    });
    // The open loop drives the HTTP workloads only.
    assert.equal(byKey('flood').env.RATE, '900');
    assert.equal(byKey('nostr').env.RATE, undefined);
    assert.equal(byKey('adaptive-lead').env.RATE, undefined);
    assert.equal(byKey('adaptive-lead').env.CONNECTIONS, '4');
    // Each run goes to the session's relay its workload names.
    assert.equal(byKey('heavy').relay, 'heavy');
    assert.equal(byKey('flood').relay, 'light');
    assert.equal(byKey('nostr').relay, 'per-run');
    assert.equal(byKey('adaptive-none').relay, 'none');
    // The relay alone is given the cluster when the session starts no standalone Valkey.
    const clusterOnly = plan({ clients: 'cluster', workload: 'nostr' });
    assert.deepEqual(sessionOf(clusterOnly).needs, ['cluster']);
    assert.equal(runsOf(clusterOnly).find((r) => r.target === 'relay-alone')!.valkey, 'cluster');
    // The file a run writes is named by its workload, as the report reads it.
    const r = byKey('nostr-relay-verified');
    assert.match(
      runFileName({
        implementation: r.implementation,
        mode: r.mode,
        workload: spec(r.workload).load as 'nostr',
        nostrIdentity: spec(r.workload).nostrIdentity,
        connections: r.connections,
        durationSec: r.durationSec,
        run: r.run,
      } as Parameters<typeof runFileName>[0]),
      /^valkey-glide_standalone_nostr-relay-verified_50c_2s_run1\.json$/,
    );
  });

  it('the tab-separated lines carry the same runs, in the same order', () => {
    const entries = plan({ quick: true, clients: 'iovalkey', workload: 'light,nostr' });
    const lines = planLines(entries);
    assert.match(lines[0]!, /^session\tconfigurations=\d+\ttotal=\d+\truns=1\t/);
    assert.match(lines[0]!, /\tneeds=standalone relay-light$/);
    const runs = runsOf(entries);
    assert.equal(lines.length, 1 + runs.length);
    lines.slice(1).forEach((line, i) => {
      const [kind, valkey, relay, label, ...env] = line.split('\t');
      const r = runs[i]!;
      assert.deepEqual([kind, valkey, relay], ['run', r.valkey, r.relay]);
      assert.ok(label!.includes(`${r.target} ${r.workload}`), label);
      assert.deepEqual(
        env,
        Object.entries(r.env).map(([k, v]) => `${k}=${v}`),
      );
    });
  });

  it("every workload is named in the run file's schema, where the report reads its names", () => {
    const schema = JSON.parse(
      readFileSync(path.join(PROJECT_ROOT, 'docs', 'run-file.schema.json'), 'utf8'),
    ) as { $defs: { workloadName: { enum: string[]; 'x-variants': Record<string, unknown> } } };
    const named = schema.$defs.workloadName;
    assert.deepEqual(named.enum, WORKLOADS);
    const planned = new Set(runsOf(plan({ workload: 'everything' })).map((r) => r.workload));
    assert.deepEqual([...planned].sort(), [...WORKLOADS].sort());
    for (const w of WORKLOADS) {
      if (spec(w).load !== w) {
        assert.deepEqual(named['x-variants'][w], {
          workload: spec(w).load,
          nostrIdentity: spec(w).nostrIdentity,
        });
      }
    }
  });
});
