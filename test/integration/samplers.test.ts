/**
 * The memory samplers against real sources: a process, a relay's Prometheus endpoint and a
 * real cgroup v1 group (the formats and the fixtures' files, in process:
 * test/unit/pressure/samplers.test.ts).
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdir, rmdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  SamplerError,
  cgroupSampler,
  processSampler,
  prometheusSampler,
} from '../../src/pressure/feed/samplers.js';
import { startRelay } from '../helpers/processes.js';
import type { RelayProcess } from '../helpers/processes.js';

const MiB = 1024 * 1024;

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
