/**
 * `sluice bench oom` refusing where it cannot run, and a real memory group (the cgroup files
 * and the OOM figures, in process: test/unit/bench/oom-bench.test.ts).
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { CgroupUnavailableError, MemoryGroup } from '../../src/bench/oom/cgroup.js';
import { inCgroup } from '../../src/harness/processes.js';
import { sluice } from '../helpers/cli.js';

const MiB = 1024 * 1024;
const FIXTURES = path.resolve(import.meta.dirname, '../../../test/fixtures');

describe('sluice bench oom refuses to run without a memory cgroup', { timeout: 60_000 }, () => {
  const refuses = (args: string[], reason: RegExp) => {
    const r = sluice(['bench', 'oom', '--valkey', '127.0.0.1:1', ...args], process.env);
    assert.equal(r.status, 1, `exit status (stderr: ${r.stderr})`);
    assert.match(r.stderr, /sluice bench oom: cannot run without a memory cgroup: /);
    assert.match(r.stderr, reason);
    assert.equal(r.stdout, '', 'no table: nothing ran');
  };

  it('a parent that is not a cgroup, one that cannot be written, one that is missing', () => {
    const plain = mkdtempSync(path.join(os.tmpdir(), 'sluice-not-a-cgroup-'));
    try {
      refuses(
        ['--cgroup-parent', plain],
        /is not a memory cgroup \(neither memory\.limit_in_bytes/,
      );
      assert.deepEqual(readdirSync(plain), [], 'nothing is left in the directory');
    } finally {
      rmSync(plain, { recursive: true, force: true });
    }
    // /proc cannot be written, not even by root.
    refuses(['--cgroup-parent', '/proc/1'], /\/proc\/1 is not a memory cgroup/);
    refuses(['--cgroup-parent', '/nonexistent/cgroup'], /\/nonexistent\/cgroup does not exist/);
  });

  it("a cgroup v2 group without the memory controller (a copy of this machine's)", () => {
    refuses(
      ['--cgroup-parent', path.join(FIXTURES, 'cgroup-v2/no-memory-controller')],
      /is a cgroup v2 group without the memory controller \(cgroup\.controllers: hugetlb\)/,
    );
  });

  it('oom-probe too', () => {
    const r = sluice(['bench', 'oom-probe', '--cgroup-parent', '/proc/1'], process.env);
    assert.equal(r.status, 1);
    assert.match(r.stderr, /sluice bench oom-probe: cannot run without a memory cgroup/);
  });
});

describe('a real memory cgroup', { timeout: 60_000 }, () => {
  it('limits a process started inside it, counts its OOM kill, and is removed', async (t) => {
    let group: MemoryGroup;
    try {
      group = await MemoryGroup.create();
    } catch (err) {
      if (!(err instanceof CgroupUnavailableError)) throw err;
      t.skip(`no writable memory cgroup here: ${err.message}`);
      return;
    }
    try {
      const idle = await group.read();
      assert.equal(idle.limitBytes, Infinity);
      assert.equal(idle.oomKills, 0);
      await group.setLimit(64 * MiB);
      assert.equal((await group.read()).limitBytes, 64 * MiB);
      // Allocates (and touches) 4 MiB every 10 ms until the kernel stops it.
      const [file, args] = inCgroup(group.procsFile, process.execPath, [
        '-e',
        'const a = []; setInterval(() => a.push(Buffer.alloc(4 << 20, 1)), 10)',
      ]);
      const child = spawn(file, args, { stdio: 'ignore' });
      const [code, signal] = (await once(child, 'exit')) as [number | null, string | null];
      assert.equal(signal, 'SIGKILL', `ended by the OOM killer (code ${code})`);
      const after = await group.read();
      assert.equal(after.oomKills, 1);
      assert.ok(after.peakUsageBytes === null || after.peakUsageBytes <= 64 * MiB);
    } finally {
      await group.remove();
    }
    assert.equal(existsSync(group.dir), false, 'the group is gone');
  });
});
