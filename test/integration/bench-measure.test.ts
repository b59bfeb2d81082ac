import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { allowedCpus, parseCpuList } from '../../src/harness/pinning.js';
import { measuredRun } from '../helpers/scripts.js';
import {
  ProcessSampler,
  clockTicks,
  parseProcStat,
  withCpuPerRequest,
} from '../../src/bench/run/proc-sampler.js';

/** The sampler against real processes (the parsing and the figures: test/unit/bench/bench-measure.test.ts). */
describe('benchmark measurement', { timeout: 60_000 }, () => {
  it("samples a process's CPU time as the kernel counts it, however loaded the machine", async () => {
    // Each says when it is running (node takes a while to start on a busy machine) and
    // lasts well past the window; both are killed below. How much CPU the busy one gets
    // depends on the machine's load: the sampler must agree with the kernel's own count.
    const busy = spawn(process.execPath, [
      '-e',
      'console.log("running"); const t = Date.now(); while (Date.now() - t < 20000);',
    ]);
    const idle = spawn(process.execPath, [
      '-e',
      'console.log("running"); setTimeout(() => {}, 20000)',
    ]);
    const kernelMs = (pid: number) =>
      (parseProcStat(readFileSync(`/proc/${pid}/stat`, 'utf8')) * 1000) / clockTicks();
    try {
      await Promise.all([once(busy.stdout, 'data'), once(idle.stdout, 'data')]);
      const sampler = new ProcessSampler([
        { role: 'relay', name: 'busy', pid: busy.pid! },
        { role: 'relay', name: 'idle', pid: idle.pid! },
      ]);
      const before = kernelMs(busy.pid!);
      sampler.start();
      await new Promise((r) => setTimeout(r, 1500));
      const [b, i] = sampler.stop();
      const spent = kernelMs(busy.pid!) - before;
      assert.ok(b!.samples.length >= 4, `${b!.samples.length} samples`);
      assert.ok(spent > 0, 'the busy process ran');
      // Read within microseconds of the sampler's first and last readings: one tick apart.
      const tick = 1000 / clockTicks();
      assert.ok(
        b!.cpuMs! <= spent + tick && b!.cpuMs! >= spent - 2 * tick,
        `sampled ${b!.cpuMs} ms of CPU, the kernel counted ${spent} ms`,
      );
      assert.ok(b!.cpuPercent.mean! > i!.cpuPercent.mean!, 'busy above idle');
      assert.ok(i!.cpuPercent.mean! < 20, `idle at ${i!.cpuPercent.mean}%`);
      assert.ok(b!.rssBytes.max! > 10 * 1024 * 1024);
      assert.ok(i!.cpuMs! < 300, `idle for ${i!.cpuMs} ms`);
      const [perB] = withCpuPerRequest([b!], 1000);
      assert.equal(perB!.cpuMsPerRequest, Number((b!.cpuMs! / 1000).toFixed(4)));
      assert.equal(withCpuPerRequest([b!], 0)[0]!.cpuMsPerRequest, null);
    } finally {
      busy.kill();
      idle.kill();
    }
  });
});

/*
 * The long tail (every event from a new author) and the single box (relay, gateway and Valkey
 * pinned to the same cores) through run-benchmark.sh, as run-all.sh runs them: what the run
 * file says was pinned and how many gateway processes served, held against /proc.
 */
const VALKEY = process.env.SLUICE_TEST_STANDALONE;
const outDir = mkdtempSync(path.join(os.tmpdir(), 'sluice-long-tail-'));
after(() => rmSync(outDir, { recursive: true, force: true }));

describe(
  'long tail on a single box',
  { timeout: 240_000, skip: VALKEY ? false : 'SLUICE_TEST_STANDALONE is not set' },
  () => {
    const mine = parseCpuList(allowedCpus(process.pid));
    /** A short long-tail run with `workers: auto` through run-benchmark.sh, pinned by `env`. */
    const longTailAuto = (implementation: string, name: string, env: Record<string, string>) =>
      measuredRun({
        RATE_LIMITER_TYPE: implementation,
        REQUEST_TYPE: 'nostr-long-tail',
        CONNECTIONS: '4',
        FRESH_EVENTS_PER_SEC: '1500',
        WORKERS: 'auto',
        OUTPUT_FILE: path.join(outDir, `long-tail-${name}.json`),
        ...env,
      });
    const valkeyPid = async () => {
      const { discoverNodes } = await import('../../src/bench/run/valkey-stats.js');
      const { parseNodeAddress } = await import('../../src/store/options.js');
      return (await discoverNodes(parseNodeAddress(VALKEY!)))[0]!.pid;
    };

    it('every event by a key of its own; one core pinned: auto is one gateway process', async () => {
      const one = mine[mine.length - 1]!;
      const valkey = await valkeyPid();
      const valkeyBefore = allowedCpus(valkey);
      const r = await longTailAuto('iovalkey', 'one-core', { CPUS: String(one) });
      const c = r.config;
      assert.deepEqual(
        [c.workload, c.nostrIdentity, c.workers],
        ['nostr', 'pubkey-long-tail', 'auto'],
      );
      assert.deepEqual([c.cpus, c.loadCpus], [[one], null]);
      // A key for every event it could have signed, and as many signed as events: no author
      // signed two (the signing slices continue the authors: test/unit/bench).
      const ev = r.events!;
      assert.ok(ev.sent > 0 && ev.signed >= ev.sent, JSON.stringify(ev));
      assert.equal(ev.authors, ev.signed);
      assert.ok(c.freshEvents!.authors >= ev.signed);
      assert.equal(ev.duplicates, 0);
      // workers: auto counts the cores the gateway may use: one.
      assert.equal(r.gatewayWorkers, 1);
      const where = Object.fromEntries(r.affinity!.map((a) => [a.role, a.cpus]));
      assert.deepEqual(
        [where.gateway, where.relay, where.valkey],
        [String(one), String(one), String(one)],
        JSON.stringify(r.affinity),
      );
      // The load generator was not pinned; Valkey, which outlives the run, got its cores back.
      assert.equal(where.load, allowedCpus(process.pid));
      assert.equal(allowedCpus(valkey), valkeyBefore);
    });

    it('every core pinned: auto is a gateway process per core, each one pinned', async () => {
      const r = await longTailAuto('quotas-off', 'all-cores', {
        CPUS: mine.join(','),
        LOAD_CPUS: String(mine[0]),
      });
      assert.equal(r.gatewayWorkers, mine.length);
      const gateways = r.affinity!.filter((a) => a.role === 'gateway');
      // The primary and its workers (one process when there is a single core).
      assert.equal(gateways.length, mine.length > 1 ? mine.length + 1 : 1);
      for (const g of gateways) assert.deepEqual(parseCpuList(g.cpus), mine, g.name);
      assert.equal(r.affinity!.find((a) => a.role === 'load')!.cpus, String(mine[0]));
      assert.deepEqual(r.config.loadCpus, [mine[0]]);
    });

    it('refuses CPUs it may not use, and --authors on the long tail, before starting anything', async () => {
      const { sluice } = await import('../helpers/cli.js');
      const base = ['bench', 'run', '--implementation', 'iovalkey', '--valkey', VALKEY!];
      const far = sluice([...base, '--workload', 'nostr', '--cpus', '4095'], process.env);
      assert.notEqual(far.status, 0);
      assert.match(far.stderr, /CPU 4095 is not among those this process may use/);
      const authors = sluice(
        [...base, '--workload', 'nostr-long-tail', '--authors', '10'],
        process.env,
      );
      assert.notEqual(authors.status, 0);
      assert.match(authors.stderr, /signs every event with a key of its own/);
      // The long tail by its identity alone would sign with nostr's 1,000 keys: refused.
      const identity = sluice(
        [...base, '--workload', 'nostr', '--nostr-identity', 'pubkey-long-tail'],
        process.env,
      );
      assert.notEqual(identity.status, 0);
      assert.match(identity.stderr, /use --workload nostr-long-tail/);
    });
  },
);
