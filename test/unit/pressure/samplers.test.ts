import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdir, rmdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { resolveTarget } from '../../../src/pressure/feed/feed-process.js';
import {
  SamplerError,
  cgroupSampler,
  parseKeyValues,
  parseLimit,
  parsePressure,
  parsePrometheusValue,
  processSampler,
  prometheusSampler,
} from '../../../src/pressure/feed/samplers.js';
import { decodeReport, encodeReport, pressureKey } from '../../../src/pressure/report.js';
import { startRelay } from '../../helpers/processes.js';
import type { RelayProcess } from '../../helpers/processes.js';

const MiB = 1024 * 1024;
/** Real cgroup files copied from this kind of machine, and v2 ones (see test/fixtures/README.md). */
const FIXTURES = path.resolve(import.meta.dirname, '../../../../test/fixtures');
const fixture = (name: string) => path.join(FIXTURES, name);

describe('memory samplers', { timeout: 60_000 }, () => {
  let relay: RelayProcess;
  before(async () => {
    relay = await startRelay({ nodeId: 'sampled' });
  });
  after(async () => {
    await relay.stop();
  });

  it('reads a real process: RSS without file-backed pages follows what it allocates', async () => {
    const sampler = processSampler(process.pid);
    const before = await sampler.sample();
    const held = Buffer.alloc(64 * MiB, 1); // touched, so resident
    const during = await sampler.sample();
    assert.ok(
      during.bytes - before.bytes > 48 * MiB,
      `grew ${(during.bytes - before.bytes) / MiB} MiB`,
    );
    assert.ok(during.detail.rss! >= during.detail.rssAnon!);
    assert.equal(held[0], 1);
  });

  it("reads the relay's own memory metric from its Prometheus endpoint", async () => {
    const viaMetrics = await prometheusSampler(
      `${relay.url}/metrics`,
      'relay_rss_anon_bytes',
    ).sample();
    const viaProc = await processSampler(relay.pid).sample();
    assert.ok(viaMetrics.bytes > 10 * MiB);
    // Two readings of one process moments apart: the same order of magnitude.
    assert.ok(Math.abs(viaMetrics.bytes - viaProc.bytes) < 0.5 * viaProc.bytes);
  });

  it('fails with a clear error for an unreadable source', async () => {
    await assert.rejects(
      processSampler(2 ** 22 + 7).sample(),
      (err: Error) => err instanceof SamplerError && /cannot read \/proc\//.test(err.message),
    );
    await assert.rejects(
      prometheusSampler(`${relay.url}/metrics`, 'no_such_metric').sample(),
      /exports no metric no_such_metric/,
    );
    await assert.rejects(
      prometheusSampler('http://127.0.0.1:1/metrics', 'x').sample(),
      /cannot read http:\/\/127\.0\.0\.1:1/,
    );
  });
});

describe('kernel and exposition formats', { timeout: 60_000 }, () => {
  it('parses cgroup v2 memory.stat and memory.pressure as the kernel writes them', () => {
    const stat = parseKeyValues(
      'anon 104857600\nfile 52428800\ninactive_file 20971520\nactive_file 31457280\n',
    );
    assert.equal(stat.inactive_file, 20971520);
    const psi = parsePressure(
      'some avg10=1.25 avg60=0.50 avg300=0.10 total=12345\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n',
    );
    assert.equal(psi.some_avg10, 1.25);
    assert.equal(psi.full_total, 0);
  });

  it('finds a metric in Prometheus text, labels or not', () => {
    const text =
      '# HELP m x\n# TYPE m gauge\nrelay_rss_bytes 123\nrelay_rss_anon_bytes{node="a"} 4.5e+07\n';
    assert.equal(parsePrometheusValue(text, 'relay_rss_anon_bytes'), 45_000_000);
    assert.equal(parsePrometheusValue(text, 'relay_rss'), undefined);
    assert.equal(parsePrometheusValue(text, 'relay_rss_anon_bytes', '{node="a"}'), 45_000_000);
    assert.equal(parsePrometheusValue(text, 'relay_rss_anon_bytes', '{node="b"}'), undefined);
  });
});

describe('pressure reports', { timeout: 60_000 }, () => {
  it('round-trip, and anything else is ignored rather than trusted', () => {
    const report = {
      node: 'relay-a',
      m: 0.45,
      u: 0.93,
      uhat: 1.01,
      mode: 'normal' as const,
      seq: 7,
      ts: 1_700_000_000_000,
      law: 'lead',
    };
    assert.deepEqual(decodeReport(encodeReport(report)), report);
    assert.equal(decodeReport('{"node":"a","m":7}'), undefined);
    assert.equal(decodeReport('not json'), undefined);
    assert.equal(decodeReport(null), undefined);
    assert.equal(pressureKey('relay-a'), 'sluice:pressure:{relay-a}');
  });
});

describe('cgroup samplers on real files of both versions', { timeout: 60_000 }, () => {
  it('v1: usage_in_bytes less total_inactive_file, no limit at the root', async () => {
    const { bytes, detail } = await cgroupSampler(fixture('cgroup-v1/root')).sample();
    assert.equal(detail.version, 1);
    assert.equal(detail.usage, 3631165440);
    assert.equal(detail.inactiveFile, 1975508992);
    assert.equal(bytes, 3631165440 - 1975508992);
    // 9223372036854771712 is how v1 writes "no limit".
    assert.equal(detail.limit, Infinity);
    assert.equal(detail.oomKill, 0);
    assert.equal(detail.failcnt, 0);
  });

  it("v1: a limited group's page cache is not counted, its limit is", async () => {
    const { bytes, detail } = await cgroupSampler(fixture('cgroup-v1/cached')).sample();
    assert.equal(detail.limit, 256 * MiB);
    assert.equal(detail.inactiveFile, 50335744, 'the 48 MiB file it wrote');
    assert.equal(bytes, 143646720 - 50335744);
  });

  it("v1: the kernel's OOM kill and failed charges show in the detail", async () => {
    const { bytes, detail } = await cgroupSampler(fixture('cgroup-v1/oom-killed')).sample();
    assert.equal(detail.limit, 160 * MiB);
    assert.equal(detail.oomKill, 1);
    assert.equal(detail.underOom, 0);
    assert.equal(detail.failcnt, 91);
    assert.equal(bytes, 41598976);
  });

  it('v2: memory.current less inactive_file, memory.max, oom_kill and PSI', async () => {
    const { bytes, detail } = await cgroupSampler(fixture('cgroup-v2/limited')).sample();
    assert.equal(detail.version, 2);
    assert.equal(detail.usage, 154222592);
    assert.equal(detail.inactiveFile, 32 * MiB);
    assert.equal(bytes, 154222592 - 32 * MiB);
    assert.equal(detail.limit, 256 * MiB);
    assert.equal(detail.oomKill, 2);
    assert.equal(detail.some_avg10, 3.14);
  });

  it("v2: 'max' is no limit; a missing memory.events or PSI still reads", async () => {
    const { detail } = await cgroupSampler(fixture('cgroup-v2/unlimited')).sample();
    assert.equal(detail.limit, Infinity);
    assert.equal(detail.oomKill, 0);
    assert.equal(detail.some_avg10, undefined);
  });

  it('names the fix for a v2 group without the memory controller, and a missing one', async () => {
    await assert.rejects(
      cgroupSampler(fixture('cgroup-v2/no-memory-controller')).sample(),
      (err: Error) =>
        err instanceof SamplerError &&
        /neither memory.current \(cgroup v2\) nor memory.usage_in_bytes/.test(err.message) &&
        /\+memory.*cgroup.subtree_control/.test(err.message),
    );
    await assert.rejects(
      cgroupSampler(fixture('cgroup-v9')).sample(),
      /cannot read .*cgroup-v9: ENOENT/,
    );
  });

  it('limits: max and the v1 huge value are none, garbage is an error', () => {
    assert.equal(parseLimit('max\n'), Infinity);
    assert.equal(parseLimit('9223372036854771712\n'), Infinity);
    assert.equal(parseLimit('268435456\n'), 256 * MiB);
    assert.throws(() => parseLimit('-1'), /not a memory limit/);
  });

  it('--target-fraction: a share of the limit; none without a limit or a cgroup', async () => {
    const v1 = fixture('cgroup-v1/oom-killed');
    assert.equal(
      await resolveTarget({ targetFraction: 0.5, cgroup: v1 }, cgroupSampler(v1)),
      80 * MiB,
    );
    assert.equal(await resolveTarget({ targetBytes: 123 }, cgroupSampler(v1)), 123);
    const unlimited = fixture('cgroup-v2/unlimited');
    await assert.rejects(
      resolveTarget({ targetFraction: 0.8, cgroup: unlimited }, cgroupSampler(unlimited)),
      /has no memory limit.*give --target-bytes/,
    );
    await assert.rejects(
      resolveTarget({ targetFraction: 0.8 }, processSampler(process.pid)),
      /needs --cgroup/,
    );
    await assert.rejects(
      resolveTarget({ targetFraction: 0.8, targetBytes: 1 }, cgroupSampler(v1)),
      /exactly one of --target-bytes and --target-fraction/,
    );
  });
});

/** A node process that allocates `n` MiB (touched) for each line "n" on its stdin. */
function allocator(): { child: ChildProcess; line: (re: RegExp) => Promise<string> } {
  const child = spawn(
    process.execPath,
    [
      '-e',
      `const held = [];
       require('node:readline').createInterface({ input: process.stdin }).on('line', (l) => {
         for (let i = 0; i < Number(l); i++) held.push(Buffer.alloc(1 << 20, 1));
         console.log('held ' + held.length);
       });
       console.log('ready');`,
    ],
    { stdio: ['pipe', 'pipe', 'inherit'] },
  );
  let out = '';
  child.stdout.on('data', (chunk: Buffer) => (out += String(chunk)));
  return {
    child,
    /** The first line of its output matching `re`, polled until it exits. */
    line: async (re: RegExp) => {
      const deadline = Date.now() + 30_000;
      for (;;) {
        const found = out.split('\n').find((l) => re.test(l));
        if (found) return found;
        if (child.exitCode !== null || child.signalCode !== null || Date.now() > deadline) {
          throw new Error(`the allocator did not print ${re}: ${out}`);
        }
        await sleep(20);
      }
    },
  };
}

describe('a real cgroup v1 memory group', { timeout: 120_000 }, () => {
  const root = '/sys/fs/cgroup/memory';
  const group = path.join(root, `sluice-test-${process.pid}`);
  let made = false;
  const children: ChildProcess[] = [];

  after(async () => {
    for (const child of children) child.kill('SIGKILL');
    if (!made) return;
    // The group can be removed once its last task has exited: poll for it.
    const deadline = Date.now() + 10_000;
    for (;;) {
      try {
        await rmdir(group);
        return;
      } catch (err) {
        if (Date.now() > deadline) throw err;
        await sleep(50);
      }
    }
  });

  it('follows what a process inside allocates, reads the limit and counts an OOM kill', async (t) => {
    try {
      await mkdir(group);
      made = true;
      await writeFile(path.join(group, 'memory.limit_in_bytes'), String(192 * MiB));
    } catch (err) {
      t.skip(`cannot create a cgroup v1 memory group under ${root}: ${(err as Error).message}`);
      return;
    }
    const sampler = cgroupSampler(group);
    const empty = await sampler.sample();
    assert.equal(empty.detail.version, 1);
    assert.equal(empty.detail.limit, 192 * MiB);
    assert.equal(empty.detail.oomKill, 0);

    const { child: holder, line } = allocator();
    children.push(holder);
    await line(/^ready/);
    // Charged from here on: pages it touches after joining count against the group.
    await writeFile(path.join(group, 'cgroup.procs'), String(holder.pid));
    const joined = await sampler.sample();
    holder.stdin!.write('64\n');
    await line(/^held 64/);
    const grown = await sampler.sample();
    const growth = grown.bytes - joined.bytes;
    assert.ok(growth > 56 * MiB && growth < 96 * MiB, `grew ${(growth / MiB).toFixed(1)} MiB`);

    // Past the limit: the kernel kills it, and the group's own counter says so.
    const exited = once(holder, 'exit') as Promise<[number | null, string | null]>;
    holder.stdin!.write('256\n');
    const [code, signal] = await exited;
    assert.equal(signal, 'SIGKILL', `exit ${code}`);
    const after = await sampler.sample();
    assert.ok(after.detail.oomKill! >= 1, `oom_kill ${after.detail.oomKill}`);
    assert.ok(after.detail.failcnt! > 0);
    assert.ok(after.bytes < grown.bytes, 'its memory was freed');
  });
});
