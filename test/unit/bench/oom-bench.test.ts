import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import {
  memoryHierarchy,
  ownMemoryGroupDir,
  parseLimit,
  parseOomKills,
  workingSet,
} from '../../../src/bench/oom/cgroup-files.js';
import { emptyFloodCounts } from '../../../src/bench/oom/flood.js';
import type { Acked, FloodCounts } from '../../../src/bench/oom/flood.js';
import { classifyOk } from '../../../src/bench/oom/nostr-client.js';
import {
  ackRate,
  allMet,
  lostEvents,
  markdownTable,
  secondsAbove,
  summarizeArm,
  targetsOf,
} from '../../../src/bench/oom/summary.js';
import type { OomSample } from '../../../src/bench/oom/summary.js';
import { classifyHttp } from '../../../src/bench/oom/transports.js';

const MiB = 1024 * 1024;
const FIXTURES = path.resolve(import.meta.dirname, '../../../../test/fixtures');
const fixture = (...p: string[]) => readFileSync(path.join(FIXTURES, ...p), 'utf8');

/** /proc/self/mountinfo and /proc/self/cgroup of this kind of machine (v1 memory, v2 beside it). */
const MOUNTINFO_V1 = `31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`;
const PROC_CGROUP_V1 = `9:name=systemd:/
5:devices:/
4:memory:/process_api/8d6dbb19c2910f75edffb87adb64b4fc
1:cpu:/
0::/
`;

describe('cgroup files', { timeout: 10_000 }, () => {
  it("finds this process's memory group: v1 where mounted, else v2, a mounted subtree", () => {
    assert.deepEqual(ownMemoryGroupDir(PROC_CGROUP_V1, MOUNTINFO_V1), {
      version: 1,
      dir: '/sys/fs/cgroup/memory/process_api/8d6dbb19c2910f75edffb87adb64b4fc',
    });
    const v2 = '29 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n';
    assert.deepEqual(ownMemoryGroupDir('0::/user.slice/session-3.scope\n', v2), {
      version: 2,
      dir: '/sys/fs/cgroup/user.slice/session-3.scope',
    });
    // A container sees only its own subtree, mounted at /sys/fs/cgroup.
    const boxed = '29 23 0:26 /kubepods/pod1 /sys/fs/cgroup ro - cgroup2 cgroup2 rw\n';
    assert.deepEqual(ownMemoryGroupDir('0::/kubepods/pod1/app\n', boxed), {
      version: 2,
      dir: '/sys/fs/cgroup/app',
    });
    assert.deepEqual(ownMemoryGroupDir('0::/\n', boxed.replace('/kubepods/pod1', '/')), {
      version: 2,
      dir: '/sys/fs/cgroup',
    });
    const none = ownMemoryGroupDir('0::/\n', '22 1 8:1 / / rw - ext4 /dev/sda1 rw\n');
    assert.ok('problem' in none && /no cgroup memory hierarchy/.test(none.problem));
    const outside = ownMemoryGroupDir('0::/elsewhere\n', boxed);
    assert.ok('problem' in outside && /outside the mounted part/.test(outside.problem));
    assert.equal(memoryHierarchy(MOUNTINFO_V1)?.mountPoint, '/sys/fs/cgroup/memory');
  });

  it('reads the OOM kill counter, the limit and the working set of both versions', () => {
    assert.equal(parseOomKills(fixture('cgroup-v1/oom-killed/memory.oom_control')), 1);
    assert.equal(parseOomKills(fixture('cgroup-v1/root/memory.oom_control')), 0);
    assert.equal(parseOomKills(fixture('cgroup-v2/limited/memory.events')), 2);
    assert.equal(parseOomKills('oom_kill_disable 0\nunder_oom 0\n'), undefined);
    assert.equal(parseLimit(fixture('cgroup-v1/root/memory.limit_in_bytes')), Infinity);
    assert.equal(parseLimit(fixture('cgroup-v1/oom-killed/memory.limit_in_bytes')), 160 * MiB);
    assert.equal(parseLimit('max\n'), Infinity);
    // v1: usage less total_inactive_file (the 48 MiB file this group wrote is page cache).
    const v1 = workingSet(
      1,
      fixture('cgroup-v1/cached/memory.usage_in_bytes'),
      fixture('cgroup-v1/cached/memory.stat'),
    );
    assert.equal(v1.usageBytes, 143646720);
    assert.equal(v1.inactiveFileBytes, 50335744);
    assert.equal(v1.workingSetBytes, 143646720 - 50335744);
    assert.equal(v1.anonBytes, 90877952);
    const v2 = workingSet(
      2,
      fixture('cgroup-v2/limited/memory.current'),
      fixture('cgroup-v2/limited/memory.stat'),
    );
    assert.equal(v2.workingSetBytes, v2.usageBytes - v2.inactiveFileBytes);
    assert.ok(v2.inactiveFileBytes > 0 && v2.anonBytes > 0);
  });
});

const counts = (over: Partial<FloodCounts> = {}): FloodCounts => ({
  ...emptyFloodCounts(),
  ...over,
});

describe('OOM figures', { timeout: 10_000 }, () => {
  it('charges each lost acknowledged event to the first death after its ack', () => {
    const acked: Acked[] = [
      { id: 'a', t: 1 },
      { id: 'b', t: 4 },
      { id: 'c', t: 5 },
      { id: 'd', t: 9 },
      { id: 'e', t: 12 },
      { id: 'f', t: 20 },
    ];
    // The relay died at 6 s and 15 s; what it still has after the run:
    const found = new Set(['a', 'd']);
    const lost = lostEvents(acked, found, [{ t: 15 }, { t: 6 }]);
    assert.deepEqual(lost, {
      acked: 6,
      found: 2,
      lost: 4,
      lostPerDeath: [2, 1],
      // Acknowledged after the last death and still lost: not the OOM killer's doing.
      lostWithoutDeath: 1,
    });
    assert.deepEqual(lostEvents(acked, new Set(acked.map((a) => a.id)), []), {
      acked: 6,
      found: 6,
      lost: 0,
      lostPerDeath: [],
      lostWithoutDeath: 0,
    });
  });

  it('accepted rates, time above target, and the targets of an arm', () => {
    const acked: Acked[] = Array.from({ length: 300 }, (_, i) => ({ id: `${i}`, t: i / 10 }));
    assert.equal(ackRate(acked, 10, 20), 10);
    assert.equal(ackRate(acked, 5, 5), 0);
    const samples: OomSample[] = [0, 1, 2, 3, 4].map((t) => ({
      t,
      workingSetBytes: [50, 120, 130, 90, 110][t]! * MiB,
      usageBytes: 0,
      anonBytes: 0,
      activeFileBytes: 0,
      oomKills: 0,
      multiplier: 1,
      emergency: false,
      acked: 0,
    }));
    // Above 100 MiB at the samples of 1, 2 and 4 s, each standing for the second before it.
    assert.equal(secondsAbove(samples, 100 * MiB), 3);
    const frame = {
      idleBytes: 40 * MiB,
      limitBytes: 136 * MiB,
      targetBytes: 104 * MiB,
      sustainablePerSec: 10,
      calmSec: 10,
      floodSec: 20,
    };
    const noLoss = lostEvents(acked, new Set(acked.map((a) => a.id)), []);
    const held = summarizeArm(frame, samples, acked, counts({ ok: 300, limited: 50 }), noLoss, 0);
    assert.equal(held.acceptedShareOfSustainable, 1);
    assert.equal(held.settledAcceptedShareOfSustainable, 1);
    assert.equal(held.peakOverTarget, 130 / 104);
    assert.equal(held.peakOverLimit, 130 / 136);
    const t = targetsOf(held);
    assert.equal(t.peakAtMostTarget, false);
    assert.equal(t.noKills && t.noAckedLost && t.acceptedAtLeast85 && t.onlyRateLimits, true);
    assert.equal(allMet(t), false);
    // A 5xx or a connection error breaks "clients see only rate limits".
    const failed = summarizeArm(frame, samples, acked, counts({ server: 1 }), noLoss, 1);
    assert.equal(targetsOf(failed).onlyRateLimits, false);
    assert.equal(targetsOf(failed).noKills, false);

    const table = markdownTable([
      { relay: 'reference', flood: 'spam', variant: 'lead', budget: 'learned', summary: held },
    ]);
    assert.match(table, /^\| relay \| flood \| adaptation \| write budget \| OOM kills/);
    assert.match(
      table,
      /\| reference \| spam wave \| lead law \| learned \| 0 \| 300, 0 \| 0\.96 \| 1\.25 \|/,
    );
  });

  it('sorts answers as clients read them, over HTTP and Nostr', () => {
    assert.deepEqual(classifyHttp(200, '{"id":"x","accepted":true}'), {
      outcome: 'ok',
      code: '200',
    });
    assert.equal(classifyHttp(200, '{"accepted":false,"message":"invalid: x"}').outcome, 'refused');
    assert.equal(classifyHttp(200, 'not json').outcome, 'refused');
    assert.equal(classifyHttp(429, '').outcome, 'limited');
    assert.equal(classifyHttp(503, '').outcome, 'server');
    assert.equal(classifyHttp(413, '').outcome, 'client');
    assert.deepEqual(classifyHttp(0, ''), { outcome: 'error', code: 'no answer' });
    assert.equal(classifyOk(true, '').outcome, 'ok');
    assert.deepEqual(classifyOk(false, 'rate-limited: relay under memory pressure, retry in 2s'), {
      outcome: 'limited',
      code: 'OK false rate-limited',
    });
    assert.equal(classifyOk(false, 'error: relay unavailable').outcome, 'server');
    assert.equal(classifyOk(false, 'invalid: bad signature').outcome, 'refused');
  });
});
