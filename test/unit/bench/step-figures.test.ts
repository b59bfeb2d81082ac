/**
 * The step-response figures on made-up series: a loop that settles, one that overshoots and
 * rings down, one that never settles (the figure says so, it is never a number), recovery of
 * the accepted rate that holds, that comes too late, that never comes.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { figureText, stepFigures, trailingRate } from '../../../src/bench/step/figures.js';
import type { StepSeries, StepWindow } from '../../../src/bench/step/figures.js';

const DT = 0.25;

/** A series every 0.25 s for `seconds`, u and the accepted rate (writes/s) as functions of t. */
function series(
  seconds: number,
  u: (t: number) => number,
  rate: (t: number) => number,
  m: (t: number) => number = () => 1,
): StepSeries {
  const s: StepSeries = { t: [], u: [], m: [], accepted: [] };
  let acc = 0;
  for (let k = 0; k <= Math.round(seconds / DT); k++) {
    const t = k * DT;
    if (k > 0) acc += rate(t) * DT;
    s.t.push(t);
    s.u.push(u(t));
    s.m.push(m(t));
    s.accepted.push(acc);
  }
  return s;
}

const window = (over: Partial<StepWindow> = {}): StepWindow => ({
  onset: 10,
  end: 50,
  recoverFrom: 10,
  recoverRatePerSec: 90,
  ...over,
});

describe('step-response figures', () => {
  it('a first-order rise to 0.9: settles where it enters ±0.05 of 0.9 for good, error -0.1', () => {
    // u = 0.5 before the onset, then 0.9 - 0.4 exp(-(t - 10) / 4).
    const s = series(
      50,
      (t) => (t <= 10 ? 0.5 : 0.9 - 0.4 * Math.exp(-(t - 10) / 4)),
      () => 100,
      (t) => (t <= 10 ? 1 : 0.35),
    );
    const f = stepFigures(s, window());
    // 0.4 exp(-x/4) <= 0.05 from x = 4 ln 8 = 8.32 s; the first sample at or after: 8.5 s.
    assert.equal(f.settleSec.value, 8.5);
    assert.ok(Math.abs(f.steadyU! - 0.9) < 1e-3);
    assert.ok(Math.abs(f.steadyStateError.value! + 0.1) < 1e-3);
    assert.ok(f.peakOverTarget! < 0.9 && f.peakOverTarget! > 0.899);
    assert.equal(f.steadyM, 0.35);
    // The rate never fell below 90/s.
    assert.equal(f.recover90Sec.value, 0);
    assert.ok(Math.abs(f.steadyAcceptedPerSec! - 100) < 1e-6);
  });

  it('overshoot: the peak over target and when, then a ring-down that settles', () => {
    // A damped oscillation around 0.95 peaking above 1.1.
    const u = (t: number) =>
      t <= 10 ? 0.6 : 0.95 - 0.35 * Math.exp(-(t - 10) / 5) * Math.cos((t - 10) * 0.8);
    const f = stepFigures(
      series(50, u, () => 100),
      window(),
    );
    assert.ok(f.peakOverTarget! > 1.1, `peak ${f.peakOverTarget}`);
    assert.ok(f.peakAtSec! > 3 && f.peakAtSec! < 5, `peak at ${f.peakAtSec}`);
    assert.ok(f.settleSec.value! > 5 && f.settleSec.value! < 15, `settle ${f.settleSec.value}`);
  });

  it('never settles: a saw-tooth wider than the band gives no settling time and no error', () => {
    // 0.8 to 1.0 every 4 s, to the end.
    const u = (t: number) => (t <= 10 ? 0.5 : 0.8 + 0.2 * (((t - 10) % 4) / 4));
    const f = stepFigures(
      series(50, u, () => 100),
      window(),
    );
    assert.equal(f.settleSec.value, null);
    assert.match(f.settleSec.why!, /did not stay within ±0.05/);
    assert.equal(f.steadyStateError.value, null);
    assert.equal(f.steadyStateError.why, 'not settled');
    assert.match(figureText(f.settleSec), /^never \(u did not stay/);
    // Still a peak, and a steady median: those are measured, not inferred.
    assert.ok(f.peakOverTarget! > 0.98);
    assert.ok(f.steadyUSpread! > 0.15);
  });

  it('never settles: still rising at the end (a ramp)', () => {
    const f = stepFigures(
      series(
        50,
        (t) => (t <= 10 ? 0.5 : 0.5 + 0.02 * (t - 10)),
        () => 100,
      ),
      window(),
    );
    assert.equal(f.settleSec.value, null);
  });

  it('settles only inside the steady window: not settled', () => {
    // Flat at 0.7, then a jump to 0.95 five seconds before the end: the final stretch inside
    // the band is 5 s, shorter than the 10 s steady window.
    const u = (t: number) => (t <= 45 ? 0.7 : 0.95);
    const f = stepFigures(
      series(50, u, () => 100),
      window(),
    );
    assert.equal(f.settleSec.value, null);
  });

  it('a window too short for a steady value says so', () => {
    const f = stepFigures(
      series(
        50,
        () => 0.5,
        () => 100,
      ),
      window({ end: 15 }),
    );
    assert.equal(f.settleSec.value, null);
    assert.match(f.settleSec.why!, /shorter than 10 s/);
    assert.equal(f.steadyU, null);
  });

  it('no samples after the onset: every figure null with the reason', () => {
    const f = stepFigures(
      series(
        5,
        () => 0.5,
        () => 100,
      ),
      window(),
    );
    assert.equal(f.peakOverTarget, null);
    assert.equal(f.settleSec.value, null);
    assert.equal(f.recover90Sec.value, null);
    assert.match(f.recover90Sec.why!, /samples after the onset/);
  });

  it('recovery: from the end of the disturbance until the rate holds at 90%', () => {
    // 100/s, cut to 20/s from 10 s, back to 100/s from 25 s (the disturbance ends at 20 s).
    const rate = (t: number) => (t > 10 && t <= 25 ? 20 : 100);
    const f = stepFigures(
      series(50, () => 0.8, rate),
      window({ recoverFrom: 20 }),
      { rateWindowSec: 2 },
    );
    // The trailing 2 s average reaches 90/s when 7/8 of the window is at 100: 26.75 s.
    assert.equal(f.recover90Sec.value, 6.75);
  });

  it('recovery never comes: null with the rate at the end', () => {
    const rate = (t: number) => (t > 10 ? 50 : 100);
    const f = stepFigures(
      series(50, () => 0.8, rate),
      window(),
    );
    assert.equal(f.recover90Sec.value, null);
    assert.match(f.recover90Sec.why!, /^50\.0\/s accepted at the end, below 90\.0\/s/);
  });

  it('recovery only in the last seconds is not a recovery', () => {
    const rate = (t: number) => (t > 10 && t <= 47 ? 50 : 100);
    const f = stepFigures(
      series(50, () => 0.8, rate),
      window(),
      { rateWindowSec: 2 },
    );
    assert.equal(f.recover90Sec.value, null);
    assert.match(f.recover90Sec.why!, /only for the last/);
  });

  it('a dip and a recovery inside a flood: timed from the onset', () => {
    // A flood accepted at 300/s, cut to 0 by an over-reaction, then held at 100/s.
    const rate = (t: number) => (t <= 12 ? 300 : t <= 18 ? 0 : 100);
    const f = stepFigures(
      series(50, () => 0.9, rate),
      window(),
      { rateWindowSec: 2 },
    );
    // Back at 100/s from 18 s: the trailing 2 s average first reaches 90/s at 20 s.
    assert.equal(f.recover90Sec.value, 10);
  });

  it('over the default 5 s, a rate that swings by a quota step around 90% counts as held', () => {
    // 19/s and 13/s in alternate seconds (a 1 s quota window on a coarse grid): 16/s on
    // average against a threshold of 14.2/s. Over 2 s it dips below now and then; over 5 s not.
    const rate = (t: number) => (Math.floor(t) % 2 ? 13 : 19);
    const w = window({ recoverRatePerSec: 14.2 });
    assert.equal(
      stepFigures(
        series(50, () => 0.9, rate),
        w,
      ).recover90Sec.value,
      0,
    );
    const short = stepFigures(
      series(50, () => 0.9, rate),
      w,
      { rateWindowSec: 1 },
    );
    assert.equal(short.recover90Sec.value, null);
  });

  it('the trailing rate starts no earlier than the recovery point', () => {
    const s = series(
      20,
      () => 0.5,
      (t) => (t <= 10 ? 0 : 100),
    );
    // Just after 10 s: less than half a window since the recovery point, no rate yet.
    assert.equal(trailingRate(s, s.t.indexOf(10.5), 10, 2), null);
    assert.equal(trailingRate(s, s.t.indexOf(11), 10, 2), 100);
    assert.equal(trailingRate(s, s.t.indexOf(15), 10, 2), 100);
  });
});
