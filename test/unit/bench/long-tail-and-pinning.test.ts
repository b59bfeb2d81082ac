import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { describe, it } from 'node:test';
import { WORKLOAD_SPECS, runFileName, workloadOf } from '../../../src/bench/run/config.js';
import type { RunConfig } from '../../../src/bench/run/config.js';
import { freshEventCount, longTailAuthors } from '../../../src/bench/run/fresh-budget.js';
import { signFreshEvents } from '../../../src/bench/run/fresh-events.js';
import {
  allowedCpus,
  checkPinning,
  parseCpuList,
  pinForRun,
  underTaskset,
} from '../../../src/harness/pinning.js';

const pubkeys = (events: string[]) =>
  events.map((e) => (JSON.parse(e) as { pubkey: string }).pubkey);

describe('the long-tail workload (every event from a new author)', { timeout: 60_000 }, () => {
  it('is a Nostr workload of its own, told apart in the run file and its name', () => {
    const spec = WORKLOAD_SPECS['nostr-long-tail'];
    assert.equal(spec.load, 'nostr');
    assert.equal(spec.group, 'nostr');
    assert.equal(spec.relayAlone, true);
    assert.deepEqual(spec.baselines, ['quotas-off']);
    const cfg = { workload: 'nostr', nostrIdentity: 'pubkey-long-tail' } as const;
    assert.equal(workloadOf(cfg), 'nostr-long-tail');
    assert.equal(workloadOf({ workload: 'nostr', nostrIdentity: 'pubkey' }), 'nostr');
    const name = runFileName({
      ...cfg,
      implementation: 'iovalkey',
      mode: 'standalone',
      relayImpl: 'nostr-rs-relay',
      connections: 16,
      durationSec: 10,
      run: 2,
      workers: 'auto',
    } as RunConfig);
    assert.equal(name, 'iovalkey-auto_standalone_nostr-long-tail_nostr-rs-relay_16c_10s_run2.json');
  });

  it('has a key for every event the warm-up and the window could ever sign', () => {
    const cfg = { warmupSec: 3, durationSec: 10, connections: 16, maxPerSec: 500 };
    assert.equal(longTailAuthors(cfg), freshEventCount(500, 3, 16) + freshEventCount(500, 10, 16));
    assert.equal(longTailAuthors({ ...cfg, warmupSec: 0 }), freshEventCount(500, 10, 16));
  });

  it('signs a later slice with the authors after the earlier one, never one key twice', async () => {
    const authors = 400;
    const warm = await signFreshEvents({ count: 150, authors, seed: 9, label: 'w' });
    const window = await signFreshEvents({ count: 250, authors, seed: 9, label: 'x', from: 150 });
    const all = [...pubkeys(warm.events), ...pubkeys(window.events)];
    assert.equal(all.length, 400);
    assert.equal(new Set(all).size, 400, 'an author signed two events');
    // The same index signs with the same key: index 150 of a session is author 150.
    const again = await signFreshEvents({ count: 1, authors, seed: 9, label: 'y', from: 150 });
    assert.equal(pubkeys(again.events)[0], pubkeys(window.events)[0]);
    // Fewer authors than events: the repeat writers' shape (author = index mod authors).
    const repeat = await signFreshEvents({ count: 40, authors: 4, seed: 9, label: 'z', from: 2 });
    assert.equal(new Set(pubkeys(repeat.events)).size, 4);
    await assert.rejects(
      signFreshEvents({ count: 1, authors: 1, seed: 9, label: 'bad', from: -1 }),
      /from must be a non-negative integer/,
    );
  });
});

describe('single-box pinning (taskset)', { timeout: 60_000 }, () => {
  it('reads CPU lists as taskset writes them and refuses anything else', () => {
    assert.deepEqual(parseCpuList('0,1'), [0, 1]);
    assert.deepEqual(parseCpuList('3,0-2,1'), [0, 1, 2, 3]);
    assert.throws(() => parseCpuList('0,x'), /bad CPU list/);
    assert.throws(() => parseCpuList('2-1'), /runs backwards/);
    assert.throws(() => checkPinning([]), /names no CPU/);
    assert.throws(() => checkPinning([4096]), /--cpus 4096: CPU 4096 is not among those/);
    // bench pair's flags name themselves in the refusal.
    assert.throws(() => checkPinning([4096], '--gateway-cpus'), /^Error: --gateway-cpus 4096:/);
    assert.deepEqual(underTaskset(null, 'node', ['a']), ['node', ['a']]);
    assert.deepEqual(underTaskset([0, 1], 'node', ['a']), ['taskset', ['-c', '0,1', 'node', 'a']]);
  });

  it('starts a process on the cores asked for, and pins one for a run then gives them back', async () => {
    const mine = parseCpuList(allowedCpus(process.pid));
    const one = [mine[mine.length - 1]!];
    checkPinning(one);
    const [file, args] = underTaskset(one, process.execPath, ['-e', 'setTimeout(() => {}, 60000)']);
    const child = spawn(file, args, { stdio: 'ignore' });
    try {
      // taskset execs node: the same pid, already pinned when node starts.
      await waitFor(() => {
        try {
          return allowedCpus(child.pid!) === String(one[0]);
        } catch {
          return false;
        }
      });
      const pinned = pinForRun([child.pid!], mine);
      assert.deepEqual(parseCpuList(allowedCpus(child.pid!)), mine);
      pinned.restore();
      assert.equal(allowedCpus(child.pid!), String(one[0]));
    } finally {
      child.kill('SIGKILL');
      await once(child, 'exit');
    }
  });
});

async function waitFor(check: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}
