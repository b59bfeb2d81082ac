import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { seededRandom } from '../../../src/util/random.js';
import {
  createFeedTracker,
  DEFAULT_FEED_TRACKER_PARAMS,
} from '../../../src/pressure/follower/staleness.js';
import type { FeedTracker, FeedValue } from '../../../src/pressure/follower/staleness.js';

// Simulated time in seconds: the feed reports about once a second, the gateway polls every
// 0.1 s, and both happen in time order.
const P = DEFAULT_FEED_TRACKER_PARAMS;
const EPS = 1e-9;
const POLL = 0.1;

type Report = [t: number, m: number];
type Polled = FeedValue & { t: number };

/** Reports of `m` once a second over [from, to). */
function everySecond(from: number, to: number, m: number): Report[] {
  const out: Report[] = [];
  for (let t = from; t < to; t++) out.push([t, m]);
  return out;
}

/** Deliver `reports` and poll every 0.1 s over [from, to], in time order. */
function play(tracker: FeedTracker, reports: Report[], from: number, to: number): Polled[] {
  const queue = [...reports].sort((a, b) => a[0] - b[0]);
  const out: Polled[] = [];
  for (let i = 0; from + i * POLL <= to + EPS; i++) {
    const t = Number((from + i * POLL).toFixed(6));
    while (queue.length && queue[0]![0] <= t + EPS) tracker.report(...queue.shift()!);
    out.push({ t, ...tracker.value(t) });
  }
  return out;
}

const at = (trace: Polled[], t: number) => trace.find((v) => Math.abs(v.t - t) < EPS)!;

function assertSlewed(trace: Polled[]): void {
  trace.slice(1).forEach((v, i) => {
    const rise = v.m - trace[i]!.m;
    assert.ok(rise <= P.rUpPerSec * POLL + EPS, `rose ${rise} in ${POLL} s at ${v.t}`);
  });
}

describe('feed tracker', { timeout: 30_000 }, () => {
  it('starts cold at the safe value: never the minimum for lack of data', () => {
    const tracker = createFeedTracker();
    for (const t of [0, 10, 3600]) {
      assert.deepEqual(tracker.value(t), { m: P.safeValue, state: 'cold', ageSec: null });
    }
    assert.ok(P.safeValue > 0 && P.safeValue < 1);
  });

  it('trusts a feed after N reports, then rises at the slew rate', () => {
    const trace = play(createFeedTracker(), everySecond(0, 30, 1), 0, 29);
    assert.deepEqual(at(trace, 1.5), { t: 1.5, m: P.safeValue, state: 'recovering', ageSec: 0.5 });
    assert.equal(at(trace, 2).state, 'fresh', 'trusted at the third report');
    assertSlewed(trace);
    const full = 2 + (1 - P.safeValue) / P.rUpPerSec;
    assert.ok(at(trace, full - 0.5).m < 1);
    assert.ok(Math.abs(at(trace, full).m - 1) < EPS, 'at 1 once (1 - safe) / rUp has passed');
  });

  it('applies drops at once, in every state', () => {
    const trace = play(createFeedTracker(), [...everySecond(0, 10, 1), [10, 0.3]], 0, 10);
    assert.equal(at(trace, 9.5).m, 1);
    assert.deepEqual(at(trace, 10), { t: 10, m: 0.3, state: 'fresh', ageSec: 0 });

    const cold = createFeedTracker();
    cold.report(0, 0.2);
    assert.deepEqual(cold.value(0), { m: 0.2, state: 'recovering', ageSec: 0 });
  });

  it('holds the last value when the feed dies, then the safe value, within 10 s', () => {
    const trace = play(createFeedTracker(), everySecond(0, 11, 0.8), 0, 40);
    const last = 10;
    assert.equal(at(trace, last + P.staleAfterSec).state, 'fresh');
    const stale = at(trace, last + P.staleAfterSec + POLL);
    assert.equal(stale.state, 'holding');
    assert.equal(stale.m, 0.8);
    assert.equal(at(trace, last + P.staleAfterSec + P.holdSec).state, 'holding');
    const safeFrom = trace.find((v) => v.state === 'safe')!;
    assert.ok(safeFrom.t - last <= 10, `safe ${safeFrom.t - last} s after the last report`);
    assert.equal(safeFrom.m, P.safeValue);
    assert.ok(
      trace.filter((v) => v.t > last).every((v) => v.m <= 0.8),
      'never above the last fresh value',
    );
  });

  it('never rises while stale: a low last value stays, even below the safe value', () => {
    const trace = play(createFeedTracker(), everySecond(0, 11, 0.2), 0, 60);
    for (const v of trace.filter((x) => x.t >= 10)) assert.equal(v.m, 0.2, `${v.state} at ${v.t}`);
  });

  it('freezes a rise that was under way when the feed went quiet', () => {
    const trace = play(createFeedTracker(), [...everySecond(0, 3, 0.4), [3, 1]], 0, 12);
    const frozen = at(trace, 3 + P.staleAfterSec).m;
    assert.ok(Math.abs(frozen - (0.4 + P.rUpPerSec * P.staleAfterSec)) < EPS);
    assert.equal(at(trace, 3 + P.staleAfterSec + 1).state, 'holding');
    assert.equal(at(trace, 3 + P.staleAfterSec + 1).m, frozen);
  });

  it('on return: N reports before trusting, then no jump larger than the up-slew', () => {
    const reports: Report[] = [
      ...everySecond(0, 11, 0.8),
      [30, 1],
      [30.5, 0.4], // a lower report is believed at once, trusted or not
      ...everySecond(31, 50, 1),
    ];
    const trace = play(createFeedTracker(), reports, 0, 49);
    assert.equal(at(trace, 29.9).state, 'safe');
    assert.equal(at(trace, 30.2).state, 'recovering');
    assert.equal(at(trace, 30.2).m, P.safeValue, 'not trusted yet: stays where it was');
    assert.equal(at(trace, 30.5).m, 0.4);
    const trustedAt = trace.find((v) => v.t > 30 && v.state === 'fresh')!.t;
    assert.equal(trustedAt, 31, 'the third report in a row since the feed came back');
    assertSlewed(trace);
    assert.ok(Math.abs(trace.at(-1)!.m - 1) < EPS);
  });

  it('never trusts a flapping feed whose reports are further apart than staleAfterSec', () => {
    const gap = P.staleAfterSec + 1;
    const flapping: Report[] = [];
    for (let t = 10 + gap; t < 120; t += gap) flapping.push([t, 1]);
    const trace = play(createFeedTracker(), [...everySecond(0, 11, 0.3), ...flapping], 0, 120);
    const after = trace.filter((v) => v.t > 10 + P.staleAfterSec);
    assert.ok(after.every((v) => v.state !== 'fresh' && v.m <= 0.3 + EPS));
  });

  it('keeps its invariants over a long random feed', () => {
    const random = seededRandom(42);
    const reports: Report[] = [];
    for (let t = 0; t < 2000; t += random() < 0.9 ? 1 : 2 + random() * 13) {
      // Mostly every second, sometimes a 2-15 s outage; values anywhere in [0, 1].
      reports.push([t, Math.round(random() * 20) / 20]);
    }
    const trace = play(createFeedTracker(), reports, 0, 2000);
    assertSlewed(trace);
    let r = 0;
    let lastFresh: number | undefined;
    for (const v of trace) {
      while (r < reports.length && reports[r]![0] <= v.t + EPS) r++;
      const lastReported = reports[r - 1]?.[1];
      assert.ok(lastReported === undefined || v.m <= lastReported + EPS, `above report, ${v.t}`);
      if (v.state === 'fresh') lastFresh = v.m;
      if ((v.state === 'holding' || v.state === 'safe') && lastFresh !== undefined) {
        // The rise may go on for part of a poll interval after the last fresh poll.
        assert.ok(v.m <= lastFresh + P.rUpPerSec * POLL + EPS, `stale ${v.m} at ${v.t}`);
      }
      if (v.state === 'safe') assert.ok(v.m <= P.safeValue + EPS);
      if (v.state === 'cold') assert.equal(v.m, P.safeValue);
    }
    const states = new Set(trace.map((v) => v.state));
    assert.deepEqual([...states].sort(), ['fresh', 'holding', 'recovering', 'safe']);
  });

  it('rejects parameters that would make no data mean all or nothing', () => {
    assert.throws(() => createFeedTracker({ safeValue: 0 }), /safeValue/);
    assert.throws(() => createFeedTracker({ safeValue: 1 }), /safeValue/);
    assert.throws(() => createFeedTracker({ freshReportsToTrust: 0 }), /freshReportsToTrust/);
    assert.throws(() => createFeedTracker().report(0, 1.5), RangeError);
  });
});
