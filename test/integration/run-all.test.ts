import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, readdirSync, realpathSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { WORKLOAD_SPECS } from '../../src/bench/run/config.js';
import type { WorkloadSpec } from '../../src/bench/run/config.js';
import { plan } from '../../src/bench/run/plan.js';
import type { PlannedRun } from '../../src/bench/run/plan.js';
import type { RunResult } from '../../src/bench/run/runner.js';
import { runScript } from '../helpers/scripts.js';
import { allowedCpus, parseCpuList } from '../../src/harness/pinning.js';

/*
 * run-all.sh runs what `sluice bench plan` says, nothing more: a small quick session (two
 * rounds, a client on each topology, the long tail with its relay alone) against the suite's
 * Valkey, pinned to every core this process may use (a single box), its run files and log
 * held against the plan computed here from the same options.
 */

const root = mkdtempSync(path.join(os.tmpdir(), 'sluice-run-all-'));
after(() => rmSync(root, { recursive: true, force: true }));

const ARGS = [
  '--quick',
  '--runs',
  '2',
  '--clients',
  'iovalkey,ioredis:cluster',
  '--workload',
  'light,nostr-long-tail',
  '--no-baselines',
  '--seed',
  '3',
];
const CPUS = parseCpuList(allowedCpus(process.pid));
const PLANNED = plan({
  quick: true,
  runs: 2,
  clients: 'iovalkey,ioredis:cluster',
  workload: 'light,nostr-long-tail',
  baselines: false,
  seed: 3,
});
// workers: auto names every gateway's file "<implementation>-auto" (not the relay alone's).
const fileOf = (r: PlannedRun) =>
  `${r.implementation}${r.implementation === 'relay-alone' ? '' : '-auto'}_${r.mode}_${r.workload}_${r.connections}c_${r.durationSec}s_run${r.run}.json`;

describe('run-all.sh', { timeout: 420_000 }, () => {
  it('runs the plan: each planned run once, in its order, with its settings', async () => {
    const { status, output } = await runScript(
      'run-all.sh',
      [
        ...ARGS,
        '--valkey-standalone',
        process.env.SLUICE_TEST_STANDALONE ?? '127.0.0.1:6390',
        '--valkey-cluster',
        process.env.SLUICE_TEST_CLUSTER ?? '127.0.0.1:7100',
        '--cpus',
        CPUS.join(','),
        '--workers',
        'auto',
      ],
      { SLUICE_RESULTS_ROOT: root },
    );
    assert.equal(status, 0, output);
    const dir = realpathSync(path.join(root, 'latest'));
    const planned = PLANNED.filter((e): e is PlannedRun => e.kind === 'run');
    // Two rounds of: light through both clients, the long tail through both and the relay
    // alone (its own baseline, kept without --no-baselines' others).
    assert.equal(planned.length, 10);
    assert.equal(planned.filter((r) => r.implementation === 'relay-alone').length, 2);

    // The plan it kept is the one computed here from the same options.
    const kept = readFileSync(path.join(dir, 'plan.jsonl'), 'utf8').trim().split('\n');
    assert.deepEqual(
      kept.map((l) => JSON.parse(l) as unknown),
      PLANNED,
    );

    // One run file per planned run, and no other.
    const files = readdirSync(dir).filter((f) => /_run\d+\.json$/.test(f));
    assert.deepEqual(files.sort(), planned.map(fileOf).sort());
    for (const r of planned) {
      const run = JSON.parse(readFileSync(path.join(dir, fileOf(r)), 'utf8')) as RunResult;
      const spec: WorkloadSpec = WORKLOAD_SPECS[r.workload];
      const c = run.config;
      assert.deepEqual(
        [c.implementation, c.mode, c.workload, c.nostrIdentity, c.connections, c.durationSec],
        [r.implementation, r.mode, spec.load, spec.nostrIdentity, r.connections, r.durationSec],
        fileOf(r),
      );
      assert.deepEqual([c.warmupSec, c.keys, c.run, c.runs], [0, 500, r.run, r.runs]);
      if (spec.load === 'nostr') assert.equal(c.freshEvents?.maxPerSec, 1500);
      // Every run pinned to the session's cores, and says so; workers: auto is a process per
      // core for the gateways, and not the relay alone's (it has no gateway).
      assert.deepEqual(c.cpus, CPUS, fileOf(r));
      const alone = r.implementation === 'relay-alone';
      assert.equal(c.workers, alone ? 1 : 'auto', fileOf(r));
      assert.equal(run.gatewayWorkers, alone ? null : CPUS.length, fileOf(r));
      if (spec.longTail) assert.equal(run.events?.authors, run.events?.signed, fileOf(r));
    }
    const readme = readFileSync(path.join(dir, 'README.md'), 'utf8');
    assert.ok(
      readme.includes(`relay, gateway and Valkey pinned to CPUs ${CPUS.join(',')} (taskset)`),
      readme,
    );

    // In the plan's order, each announced with its label.
    const labels = [...output.matchAll(/\] \d+\/\d+ {2}(run \d\/\d {2}\S+ \S+ \d+c \d+s)/g)].map(
      (m) => m[1],
    );
    assert.deepEqual(
      labels,
      planned.map(
        (r) =>
          `run ${r.run}/${r.runs}  ${r.target} ${r.workload} ${r.connections}c ${r.durationSec}s`,
      ),
    );
    assert.ok(existsSync(path.join(dir, 'report.html')), 'no report');
  });
});
