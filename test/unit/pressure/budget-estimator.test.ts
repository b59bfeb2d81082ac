/**
 * The learned write budget's estimator (pressure/budget/estimator.ts) against generated
 * histories of a simulated node: its bounds hold whatever the traffic, noise and garbage.
 *
 * - A refused flood never lowers it: gateways hold what is admitted to the budget, the node
 *   drains at least that, and however much is offered, however noisy memory is (i.i.d. jitter
 *   and a garbage collector's saw-tooth), the estimate never falls.
 * - Never above what was measured: the estimate is never above the highest rate admitted over
 *   a window (or the relay's own drain); a quiet hour changes it not at all.
 * - No data is never the minimum: once known it stays known through garbage inputs (NaN,
 *   negative, time running backwards, counters reset); a decrease is bounded in rate and by
 *   a floor (a share of the highest rate measured).
 * - And it does learn down: a node whose drain falls under a flood is followed there.
 *
 * A property failure prints fast-check's seed; replay it with SLUICE_PROPERTY_SEED=<seed>.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  DEFAULT_DRAIN_ESTIMATOR_PARAMS,
  DrainEstimator,
  BUDGET_ROOM,
  budgetPointsOf,
  twoFigures,
} from '../../../src/pressure/budget/estimator.js';
import type { DrainObservation } from '../../../src/pressure/budget/estimator.js';
import { propertyParams } from '../../helpers/property-params.js';

const MiB = 1024 * 1024;
const TICK = 0.5;
const IDLE = 40 * MiB;

/** One stretch of a history: how much is offered, what the node drains, how noisy memory is. */
interface Segment {
  sec: number;
  /** Offered, as a multiple of the node's true drain. */
  offered: number;
  /** The node's true drain (bytes/s). */
  drain: number;
  /** i.i.d. memory jitter per sample (bytes, at most). */
  jitter: number;
  /** A saw-tooth: rises by `amp` over `period` s, then drops (a GC); amp 0: none. */
  sawAmp: number;
  sawPeriod: number;
  /** The share of the budget the gateways let through (their multiplier m). */
  m: number;
  /** The relay exports its drain (the reference relay's /stats). */
  relayMetric: boolean;
}

const segment = (drain: fc.Arbitrary<number>) =>
  fc.record({
    sec: fc.integer({ min: 5, max: 120 }),
    offered: fc.double({ min: 0, max: 5, noNaN: true }),
    drain,
    jitter: fc.integer({ min: 0, max: 1 * MiB }),
    sawAmp: fc.oneof(fc.constant(0), fc.integer({ min: 1 * MiB, max: 96 * MiB })),
    sawPeriod: fc.integer({ min: 2, max: 15 }),
    m: fc.double({ min: 0, max: 1, noNaN: true }),
    relayMetric: fc.boolean(),
  });

interface Plant {
  t: number;
  admitted: number;
  points: number;
  backlog: number;
}

/**
 * Run a history through the estimator. `cap(E)` is what the gateways admit per second at
 * most given the estimate now (Infinity: no budget). Calls `check` after every tick.
 */
function run(
  est: DrainEstimator,
  segments: readonly Segment[],
  cap: (estimate: number | undefined, s: Segment) => number,
  check: (before: number | undefined, after: number | undefined, o: DrainObservation) => void,
  rand: () => number,
  plant: Plant = { t: 0, admitted: 0, points: 0, backlog: 0 },
): Plant {
  for (const s of segments) {
    for (let i = 0; i < s.sec / TICK; i++) {
      const before = est.value()?.bytesPerSec;
      const rate = Math.min(s.offered * s.drain, cap(before, s));
      const admitted = rate * TICK;
      plant.admitted += admitted;
      plant.points += admitted / (32 * 1024);
      const drained = Math.min(plant.backlog + admitted, s.drain * TICK);
      plant.backlog = plant.backlog + admitted - drained;
      plant.t += TICK;
      const saw = s.sawAmp > 0 ? ((plant.t % s.sawPeriod) / s.sawPeriod) * s.sawAmp : 0;
      const o: DrainObservation = {
        t: plant.t,
        admittedBytes: Math.floor(plant.admitted),
        admittedPoints: Math.floor(plant.points),
        memoryBytes: IDLE + plant.backlog + saw + rand() * s.jitter,
        relay: s.relayMetric
          ? { drainedBytesPerSec: drained / TICK, backlogBytes: plant.backlog }
          : undefined,
      };
      est.observe(o);
      check(before, est.value()?.bytesPerSec, o);
    }
  }
  return plant;
}

/** A deterministic random source per generated history. */
function random(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 2 ** 32;
  };
}

describe('learned budget: the estimator', { timeout: 120_000 }, () => {
  it('a flood held to the budget (the rest refused) never lowers it, whatever the noise', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 256 * 1024, max: 4 * MiB }),
        fc.double({ min: 1, max: 3, noNaN: true }),
        fc.array(segment(fc.constant(0)), { minLength: 1, maxLength: 6 }),
        fc.integer(),
        (e0, headroom, segs, seed) => {
          const est = new DrainEstimator();
          est.restore({ bytesPerSec: e0, maxMeasured: e0 });
          // The node drains at least the estimate (constant, the same in every segment).
          const drain = e0 * headroom;
          const segments = segs.map((s) => ({ ...s, drain, offered: s.offered * 10 }));
          run(
            est,
            segments,
            (e, s) => (e ?? 0) * s.m,
            (before, after, o) => {
              assert.ok(
                after !== undefined && before !== undefined && after >= before,
                `the estimate fell from ${before} to ${after} at t=${o.t}`,
              );
            },
            random(seed),
          );
        },
      ),
      propertyParams(500),
    );
  });

  it('is never above the highest rate admitted over a window or drained, and a quiet hour changes nothing', () => {
    fc.assert(
      fc.property(
        fc.array(segment(fc.integer({ min: 1024, max: 8 * MiB })), {
          minLength: 1,
          maxLength: 6,
        }),
        fc.boolean(),
        fc.integer(),
        (segments, capped, seed) => {
          const est = new DrainEstimator();
          const rand = random(seed);
          const marks: { t: number; admitted: number }[] = [];
          let highest = 0;
          const W = DEFAULT_DRAIN_ESTIMATOR_PARAMS.windowSec;
          const plant = run(
            est,
            segments,
            (e, s) => (capped && e !== undefined ? e * s.m : Infinity),
            (_before, after, o) => {
              marks.push({ t: o.t, admitted: o.admittedBytes });
              // The highest rate over any span of at least 0.8 W that ends now.
              for (let j = marks.length - 2; j >= 0; j--) {
                const span = o.t - marks[j]!.t;
                if (span > 1.2 * W) break;
                if (span >= 0.8 * W - 1e-9) {
                  highest = Math.max(highest, (o.admittedBytes - marks[j]!.admitted) / span);
                }
              }
              if (o.relay) highest = Math.max(highest, o.relay.drainedBytesPerSec);
              if (after !== undefined) {
                assert.ok(
                  after <= highest * (1 + 1e-9) + 1e-6,
                  `estimate ${after} above the highest measured ${highest} at t=${o.t}`,
                );
              }
            },
            rand,
          );
          // An hour of nothing: memory flat but for jitter and a saw-tooth, nothing admitted.
          // Checked once the windows hold only quiet samples (the flood's tail may still count).
          let settled: number | undefined;
          const quietFrom = plant.t + DEFAULT_DRAIN_ESTIMATOR_PARAMS.longWindowSec + TICK;
          plant.backlog = 0;
          run(
            est,
            [
              {
                sec: 3600,
                offered: 0,
                drain: MiB,
                jitter: MiB,
                sawAmp: 32 * MiB,
                sawPeriod: 10,
                m: 1,
                relayMetric: false,
              },
            ],
            () => Infinity,
            (_before, after, o) => {
              if (o.t <= quietFrom) settled = after;
              else assert.equal(after, settled, `a quiet hour moved the estimate at t=${o.t}`);
            },
            rand,
            plant,
          );
        },
      ),
      propertyParams(60),
    );
  });

  it('once known stays known through garbage, and falls only so fast and so far', () => {
    const garbage = fc.oneof(
      fc.constant({ t: Number.NaN }),
      fc.constant({ admittedBytes: -1 }),
      fc.constant({ memoryBytes: Number.POSITIVE_INFINITY }),
      fc.constant({ admittedBytes: 0, admittedPoints: 0 }), // a counter that was reset
      fc.constant({ tBack: true }),
    );
    fc.assert(
      fc.property(
        fc.array(segment(fc.integer({ min: 0, max: 4 * MiB })), { minLength: 1, maxLength: 6 }),
        fc.array(fc.tuple(fc.integer({ min: 0, max: 2000 }), garbage), { maxLength: 20 }),
        fc.integer({ min: 64 * 1024, max: 4 * MiB }),
        fc.integer(),
        (segments, faults, e0, seed) => {
          const p = DEFAULT_DRAIN_ESTIMATOR_PARAMS;
          const est = new DrainEstimator();
          est.restore({ bytesPerSec: e0, maxMeasured: e0 });
          assert.equal(est.value()?.bytesPerSec, e0, 'a restored estimate is in force at once');
          const at = new Map(faults.map(([i, g]) => [i, g]));
          let tick = 0;
          let lastT = 0;
          run(
            est,
            segments,
            () => Infinity,
            (before, after, o) => {
              assert.ok(after !== undefined, `the estimate was lost at t=${o.t}`);
              const max = est.value()!.maxMeasured;
              const floor = Math.min(before!, Math.max(p.minBytesPerSec, p.floorShare * max));
              if (after < before!) {
                assert.ok(after >= floor - 1e-6, `fell to ${after}, under the floor ${floor}`);
                const dt = Math.max(o.t - lastT, 0);
                const least = before! - before! * Math.min(1, dt / p.tauDownSec);
                assert.ok(after >= least - 1e-6, `fell from ${before} to ${after} in ${dt} s`);
              }
              lastT = o.t;
              const g = at.get(tick++);
              if (g) {
                const kept = est.value()!.bytesPerSec;
                const bad = { ...o, ...g, t: 'tBack' in g ? o.t - 100 : 't' in g ? g.t : o.t };
                est.observe(bad);
                assert.equal(est.value()?.bytesPerSec, kept, 'a garbage input moved the estimate');
              }
            },
            random(seed),
          );
        },
      ),
      propertyParams(100),
    );
  });

  it('follows a node whose drain falls under a flood down to it (or its floor)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 512 * 1024, max: 4 * MiB }),
        fc.double({ min: 0.05, max: 0.9, noNaN: true }),
        fc.boolean(),
        (d1, share, relayMetric) => {
          const p = DEFAULT_DRAIN_ESTIMATOR_PARAMS;
          const est = new DrainEstimator();
          const base = { jitter: 0, sawAmp: 0, sawPeriod: 10, m: 1, relayMetric };
          run(
            est,
            [
              { ...base, sec: 30, offered: 2, drain: d1 },
              // The same flood (2 x the old drain) on a node that now drains less.
              { ...base, sec: 300, offered: 2 / share, drain: d1 * share },
            ],
            () => Infinity,
            () => undefined,
            () => 0,
          );
          const e = est.value()!;
          const goal = Math.max(d1 * share, p.floorShare * e.maxMeasured, p.minBytesPerSec);
          assert.ok(
            e.bytesPerSec <= goal * 1.1,
            `estimate ${e.bytesPerSec} after 300 s at ${d1 * share} (goal ${goal})`,
          );
        },
      ),
      propertyParams(40),
    );
  });

  it('learns a calm phase as a lower bound, then the drain of a flood it cannot hold', () => {
    const est = new DrainEstimator();
    assert.equal(est.value(), undefined, 'nothing known: no budget, not a minimum');
    const drain = MiB;
    run(
      est,
      [
        {
          sec: 10,
          offered: 0.5,
          drain,
          jitter: 0,
          sawAmp: 0,
          sawPeriod: 10,
          m: 1,
          relayMetric: false,
        },
      ],
      () => Infinity,
      () => undefined,
      () => 0,
    );
    const calm = est.value()!.bytesPerSec;
    assert.ok(Math.abs(calm - 0.5 * drain) < 0.05 * drain, `calm: ${calm}`);
    run(
      est,
      [
        {
          sec: 15,
          offered: 3,
          drain,
          jitter: 0,
          sawAmp: 0,
          sawPeriod: 10,
          m: 1,
          relayMetric: false,
        },
      ],
      () => Infinity,
      () => undefined,
      () => 0,
      { t: 10, admitted: 0.5 * drain * 10, points: 0, backlog: 0 },
    );
    const flood = est.value()!;
    assert.ok(Math.abs(flood.bytesPerSec - drain) < 0.05 * drain, `flood: ${flood.bytesPerSec}`);
    assert.equal(
      budgetPointsOf(flood),
      twoFigures(flood.bytesPerSec * flood.pointsPerByte! * BUDGET_ROOM),
    );
  });

  it('a floor bounds a fall and never lifts an estimate already under it', () => {
    const est = new DrainEstimator();
    est.restore({ bytesPerSec: 2048, maxMeasured: 2048 });
    const base = { jitter: 0, sawAmp: 0, sawPeriod: 10, m: 1, relayMetric: false };
    run(
      est,
      // 100 KiB/s offered to a node draining 1 KiB/s: memory rises, the estimate may only fall.
      [{ ...base, sec: 120, offered: 100, drain: 1024 }],
      () => Infinity,
      (before, after) => assert.ok(after! <= before!, `rose from ${before} to ${after}`),
      () => 0,
    );
  });

  it('a rate taken only by going over the target is not learned', () => {
    const est = new DrainEstimator({ ceilingBytes: IDLE + 8 * MiB });
    const base = { jitter: 0, sawPeriod: 10, m: 1, relayMetric: false };
    // A saw-tooth that keeps nothing (its troughs level) but peaks 16 MiB above idle.
    run(
      est,
      [{ ...base, sec: 120, offered: 1, drain: MiB, sawAmp: 16 * MiB }],
      () => Infinity,
      () => undefined,
      () => 0,
    );
    const over = est.value()!;
    assert.equal(over.maxMeasured, 0, 'nothing measured under the ceiling');
    // Provisionally, what it was given over a window (never more), not nothing.
    assert.ok(over.bytesPerSec > 0 && over.bytesPerSec <= MiB * 1.01, `${over.bytesPerSec}`);
    const under = new DrainEstimator({ ceilingBytes: IDLE + 32 * MiB });
    run(
      under,
      [{ ...base, sec: 120, offered: 1, drain: MiB, sawAmp: 16 * MiB }],
      () => Infinity,
      () => undefined,
      () => 0,
    );
    assert.ok(under.value()!.maxMeasured >= 0.9 * MiB, 'under it, the rate is learned');
  });

  it('twoFigures rounds down to two significant figures', () => {
    assert.deepEqual([57.9, 100, 1234, 98765].map(twoFigures), [57, 100, 1200, 98000]);
  });
});
