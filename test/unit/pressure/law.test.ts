import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { backlogMultiplier, quantiseWithDeadband } from '../../../src/pressure/laws/law.js';
import type { ControlLaw } from '../../../src/pressure/laws/law.js';
import { createLeadLaw, DEFAULT_LEAD_LAW_PARAMS } from '../../../src/pressure/laws/lead-law.js';
import { createPidLaw, delayToMultiplier } from '../../../src/pressure/laws/pid-law.js';
import { DEFAULT_LAW, LAWS, LAW_NAMES } from '../../../src/pressure/laws/registry.js';
import type { LawName } from '../../../src/pressure/laws/registry.js';
import {
  createPlant,
  DEFAULT_PLANT_PARAMS,
  overloadStep,
  simulate,
} from '../../../src/bench/plant.js';
import { TickPace, paceParams } from '../../../src/pressure/feed/tick-pace.js';
import type { PlantParams, Scenario, SimOptions, SimResult } from '../../../src/bench/plant.js';

/** Each suite's bound (the simulations take well under a second each): a stuck test fails, it does not hang the run. */
const BOUND = { timeout: 60_000 };

// All in simulated time: a 1 GiB target, 60% baseline, an 8 MiB/s drain, a base quota of
// 24 MiB/s and 1 s from publication to enforcement. The 3x step fills the headroom at 1.6%
// of the target per second, like the reference relay (1 MiB/s drain) under a 128 MiB target.
const MiB = 1024 * 1024;
const DRAIN = DEFAULT_PLANT_PARAMS.drainBytesPerSec;
const TICK = 0.5;
const lead = DEFAULT_LEAD_LAW_PARAMS;

/** 3x the plant's drain from t = 30 s for 180 s, half of it before and after. */
const step3x = (drainBytesPerSec: number) =>
  overloadStep({
    sustainableBytesPerSec: drainBytesPerSec,
    factor: 3,
    quietFactor: 0.5,
    startSec: 30,
    overloadSec: 180,
  });

function run(
  law: ControlLaw,
  plant: Partial<PlantParams> = {},
  options: Partial<SimOptions> = {},
  scenario: Scenario = step3x(plant.drainBytesPerSec ?? DRAIN),
): SimResult {
  return simulate(law, createPlant(plant), scenario, {
    tickSec: TICK,
    durationSec: 270,
    ...options,
  });
}

const leadRun = run(createLeadLaw());
const pidRun = run(createPidLaw());
const onGrid = (m: number) => Math.abs(m / lead.quantum - Math.round(m / lead.quantum)) < 1e-9;

/**
 * Every law of the registry held to the closed-loop targets (a comparison law, such as the
 * PID, is compared with them further down): a new law meets them before it is listed so.
 */
const TARGETED = LAW_NAMES.filter((name) => LAWS[name].heldToTargets);
const makeLaw = (name: LawName) => LAWS[name].make({});
/** Where a law's steady u must lie: within its band when it has one, else under the target. */
function bandOf(name: LawName): { lo: number; hi: number } {
  const params = LAWS[name].defaults as object as { uLo?: number; uHi?: number };
  return { lo: params.uLo ?? 0, hi: params.uHi ?? 1 };
}

/** The closed-loop targets every law held to them meets on the simulated plant. */
function assertMeetsTargets(s: ReturnType<typeof run>['summary']): void {
  assert.ok(s.peakOverBandTop <= 1.05, `peak ${s.peakOverBandTop}`);
  assert.ok(s.settleSec !== null && s.settleSec <= 60, `settled after ${s.settleSec} s`);
  assert.equal(s.emergencyEntries, 0);
  assert.ok(s.mPeakToPeak <= 0.3, `m peak-to-peak ${s.mPeakToPeak}`);
  assert.ok(s.uPeakToPeak <= 0.1, `u peak-to-peak ${s.uPeakToPeak}`);
  assert.ok(s.acceptedRatio >= 0.85, `accepted ${s.acceptedRatio}`);
}

describe('the registry', BOUND, () => {
  it('holds at least one law to the closed-loop targets, the default one among them', () => {
    assert.ok(TARGETED.includes(DEFAULT_LAW), `${DEFAULT_LAW} not in ${TARGETED.join(', ')}`);
  });
});

for (const law of TARGETED) {
  describe(`${law} law on a 3x overload step`, BOUND, () => {
    const r = run(makeLaw(law));
    const s = r.summary;
    const band = bandOf(law);

    it('keeps peak memory within 5% of the band top', () => {
      assert.ok(s.peakOverBandTop <= 1.05, `peak ${s.peakOverBandTop} x band top`);
      assert.equal(s.timeAboveTargetSec, 0);
    });

    it('settles within +/-5% of steady state in 60 s, without an emergency', () => {
      assert.ok(s.settleSec !== null && s.settleSec <= 60, `settled after ${s.settleSec} s`);
      assert.equal(s.emergencyEntries, 0);
      assert.ok(s.steadyU < band.hi && s.steadyU > band.lo, `steady u ${s.steadyU}`);
    });

    it('does not oscillate over 120 s of overload', () => {
      assert.equal(s.window.to - s.window.from, 120);
      assert.ok(s.mPeakToPeak <= 0.3, `m peak-to-peak ${s.mPeakToPeak}`);
      assert.ok(s.uPeakToPeak <= 0.1, `u peak-to-peak ${s.uPeakToPeak}`);
    });

    it('admits at least 85% of what the relay can sustain', () => {
      assert.ok(s.acceptedRatio >= 0.85, `accepted / sustainable ${s.acceptedRatio}`);
      const steady = r.series.filter((p) => p.t >= s.window.from && p.t < s.window.to);
      assert.ok(
        steady.every((p) => p.backlogBytes > 0),
        'the relay never runs dry',
      );
    });
  });
}

for (const law of TARGETED) {
  describe(`${law} law across plants and ticks`, BOUND, () => {
    const cases: [string, Partial<PlantParams>, Partial<SimOptions>][] = [
      ['1% sampling noise', { noise: 0.01 }, {}],
      ['4x faster fill', { drainBytesPerSec: 4 * DRAIN, baseBytesPerSec: 12 * DRAIN }, {}],
      [
        'faster fill, 2 s propagation',
        { drainBytesPerSec: 4 * DRAIN, baseBytesPerSec: 12 * DRAIN, delaySec: 2 },
        {},
      ],
      [
        'faster fill, 1 s tick',
        { drainBytesPerSec: 4 * DRAIN, baseBytesPerSec: 12 * DRAIN },
        { tickSec: 1 },
      ],
      ['8x faster fill', { drainBytesPerSec: 8 * DRAIN, baseBytesPerSec: 24 * DRAIN }, {}],
      ['base quota 6x the drain', { baseBytesPerSec: 6 * DRAIN }, {}],
      ['irregular ticks (0.1-0.9 s)', {}, { tickJitter: 0.8 }],
    ];
    for (const [name, plant, options] of cases) {
      it(`meets every target with ${name}`, () => {
        const s = run(makeLaw(law), plant, options).summary;
        assertMeetsTargets(s);
      });
    }
  });
}

/**
 * A relay's memory is not a smooth plant: a collected heap saw-tooths with the bytes written,
 * collections come early at random, and a heap or pool grows once and is never given back.
 * Peaks count the garbage (the kernel does); settling and oscillation are judged on the memory
 * the law can act on (uLive: less the garbage), since no write quota removes a collector's
 * teeth.
 */
const HEADROOM = DEFAULT_PLANT_PARAMS.targetBytes - DEFAULT_PLANT_PARAMS.baselineBytes;
const NOISY_PLANTS: [string, Partial<PlantParams>, Partial<SimOptions>][] = [
  [
    'a saw-tooth up to a quarter of the headroom',
    { garbagePerByte: 0.5, garbageMaxBytes: 0.25 * HEADROOM, gcDropsPerSec: 0.02 },
    {},
  ],
  [
    'a saw-tooth up to half the headroom, collections at random, 1% sampling noise',
    { noise: 0.01, garbagePerByte: 0.5, garbageMaxBytes: 0.5 * HEADROOM, gcDropsPerSec: 0.2 },
    {},
  ],
  [
    'a heap grown to 0.8 of the headroom and kept, with its own teeth (the relay tells its backlog)',
    {
      poolPerByte: 1,
      poolMaxBytes: 0.8 * HEADROOM,
      garbagePerByte: 0.5,
      garbageMaxBytes: 0.05 * HEADROOM,
      gcDropsPerSec: 0.05,
    },
    { feedBacklog: true },
  ],
];

for (const law of TARGETED) {
  describe(`${law} law on plants with allocation noise`, BOUND, () => {
    for (const [name, plant, options] of NOISY_PLANTS) {
      it(`meets every target with ${name}`, () => {
        assertMeetsTargets(run(makeLaw(law), plant, options).summary);
      });
      it(`meets every target with ${name}, under the adaptive pace`, () => {
        const pace = new TickPace(paceParams(500, 50, 0.7));
        assertMeetsTargets(run(makeLaw(law), plant, { ...options, pace }).summary);
      });
    }

    it('holds memory but follows the teeth of a slow saw-tooth of half the headroom', () => {
      // Regular teeth of 0.2 x target every ~50 s: peaks, emergencies and acceptance hold;
      // m moves with memory the kernel counts (p2p about 0.45), so the oscillation and
      // settling targets are not met on this plant (docs/PRESSURE.md says so).
      const s = run(makeLaw(law), {
        garbagePerByte: 0.5,
        garbageMaxBytes: 0.5 * HEADROOM,
        gcDropsPerSec: 0.02,
      }).summary;
      assert.ok(s.peakOverBandTop <= 1.05, `peak ${s.peakOverBandTop}`);
      assert.equal(s.emergencyEntries, 0);
      assert.ok(s.acceptedRatio >= 0.85, `accepted ${s.acceptedRatio}`);
    });
  });
}

describe('lead law with a narrow band', BOUND, () => {
  it('takes a band narrower than minBandU as configured (the admin endpoint sets such bands)', () => {
    const law = createLeadLaw({ uLo: 0.0001, uHi: 0.0005, uExit: 0.0008, uEmerg: 0.001 });
    let out = law.step({ t: 0, u: 0.5 });
    for (let t = 0.05; t < 1; t += 0.05) out = law.step({ t, u: 0.5 });
    assert.equal(out.mode, 'emergency');
    assert.equal(out.m, DEFAULT_LEAD_LAW_PARAMS.mMin);
  });
});

describe('lead law over a plateau of memory writes do not move', BOUND, () => {
  // Writes offered at 0.9 x the drain (the node keeps up), and a heap that grew to 0.8 or all
  // of the headroom in the first writes and is never given back: the fleet's healthy nodes.
  const plateau = (share: number): Partial<PlantParams> => ({
    poolPerByte: 1,
    poolMaxBytes: share * HEADROOM,
    garbagePerByte: 0.5,
    garbageMaxBytes: 0.05 * HEADROOM,
    gcDropsPerSec: 0.05,
  });
  const underDrain = overloadStep({
    sustainableBytesPerSec: DRAIN,
    factor: 0.9,
    quietFactor: 0.9,
    startSec: 30,
    overloadSec: 180,
  });

  for (const share of [0.8, 1]) {
    it(`admits what the node keeps up with when the plateau is ${share} of the headroom`, () => {
      const told = run(createLeadLaw(), plateau(share), { feedBacklog: true }, underDrain);
      assert.ok(told.summary.acceptedRatio >= 0.95, `accepted ${told.summary.acceptedRatio}`);
      assert.equal(told.summary.emergencyEntries, 0);
      // Without the probe the level alone pins m: the collapse the fleet showed.
      const pinned = run(
        createLeadLaw({ probeStepM: 0 }),
        plateau(share),
        { feedBacklog: true },
        underDrain,
      );
      assert.ok(pinned.summary.acceptedRatio < 0.75, `no probe: ${pinned.summary.acceptedRatio}`);
    });
  }
});

describe('lead law against the notes’ parameters', BOUND, () => {
  it('beats the notes’ starting point (H 8 s, band 0.8-1.0, rUp 0.05/s) on a fast plant', () => {
    // Same law, the notes' parameters: the long look-ahead extrapolates a ramp that has
    // already been cut, slams m to mMin, and the slow rise after it starts a limit cycle.
    const notes = createLeadLaw({
      tauSec: 2,
      slopeTauSec: 4,
      leadSec: 8,
      uLo: 0.8,
      rUpPerSec: 0.05,
      deadband: 0.025,
    });
    const fast = { drainBytesPerSec: 4 * DRAIN, baseBytesPerSec: 12 * DRAIN };
    const theirs = run(notes, fast).summary;
    const ours = run(createLeadLaw(), fast).summary;
    assert.ok(theirs.mPeakToPeak > 0.3, `notes: m peak-to-peak ${theirs.mPeakToPeak}`);
    assert.ok(ours.mPeakToPeak <= 0.05 + 1e-9, `ours: m peak-to-peak ${ours.mPeakToPeak}`);
    assert.ok(ours.uPeakToPeak < theirs.uPeakToPeak / 3);
    assert.ok(ours.mChanges * 5 < theirs.mChanges, `${ours.mChanges} vs ${theirs.mChanges}`);
  });
});

for (const law of TARGETED) {
  describe(`${law} law under the adaptive pace (500 ms, 50 ms from 0.7 x target)`, BOUND, () => {
    const fastPace = () => new TickPace(paceParams(500, 50, 0.7));
    const cases: [string, Partial<PlantParams>, Partial<SimOptions>][] = [
      ['the 3x step', {}, {}],
      ['1% noise on every 50 ms sample', { noise: 0.01 }, {}],
      ['4x faster fill', { drainBytesPerSec: 4 * DRAIN, baseBytesPerSec: 12 * DRAIN }, {}],
      ['8x faster fill', { drainBytesPerSec: 8 * DRAIN, baseBytesPerSec: 24 * DRAIN }, {}],
      ['irregular ticks', {}, { tickJitter: 0.8 }],
    ];
    for (const [name, plant, options] of cases) {
      it(`filters by time: meets every closed-loop target with ${name}`, () => {
        const r = run(makeLaw(law), plant, { ...options, pace: fastPace() });
        const s = r.summary;
        assert.ok(
          r.series.filter((p) => p.t >= s.window.from).length > 1000,
          'the fast pace ran (50 ms ticks)',
        );
        assertMeetsTargets(s);
        // Twenty samples a second must not mean twenty times the published changes.
        assert.ok(s.mChanges <= 30, `${s.mChanges} changes in 120 s`);
      });
    }

    it('acts on a sudden spike at the first fast tick, where the slow pace waits for its tick', () => {
      // Pressure already up (u 0.75, a store holding memory), writes near the drain; then a
      // spike of 0.6 x the headroom left, 20 ms after a slow tick.
      const target = DEFAULT_PLANT_PARAMS.targetBytes;
      const at = 30.02;
      const spike: Scenario = {
        name: 'spike under pressure',
        overload: { from: 30, to: 60 },
        load: (t) => ({
          offeredBytesPerSec: 0.9 * DRAIN,
          spikeBytes: 0.15 * target + (t >= at && t < 50 ? 0.6 * 0.25 * target : 0),
        }),
      };
      const firstDrop = (r: SimResult) => {
        const before = r.series.filter((p) => p.t < at).at(-1)!;
        const drop = r.series.find((p) => p.t >= at && p.m < before.m);
        assert.ok(drop, 'the multiplier drops');
        return drop.t - at;
      };
      const slow = run(makeLaw(law), {}, { durationSec: 80 }, spike);
      const fast = run(makeLaw(law), {}, { durationSec: 80, pace: fastPace() }, spike);
      assert.ok(firstDrop(fast) <= 0.05 + 1e-9, `fast: dropped after ${firstDrop(fast)} s`);
      assert.ok(firstDrop(slow) >= 0.4, `slow: dropped after ${firstDrop(slow)} s`);
      for (const r of [slow, fast]) {
        assert.ok(r.summary.peakU <= 1.1, `peak ${r.summary.peakU}`);
        assert.equal(r.summary.emergencyEntries, 0);
      }
    });
  });
}

describe('jump term', BOUND, () => {
  /** m after `ticks` 50 ms samples of 0.76, then `jump` samples of 0.90 (and one more of 0.76). */
  const afterJump = (params = {}, jump = 2) => {
    const law = createLeadLaw(params);
    let t = 0;
    let before = 1;
    for (; t < 30; t += 0.05) before = law.step({ t, u: 0.76 }).m;
    const seen = [];
    for (let i = 0; i < jump; i++, t += 0.05) seen.push(law.step({ t, u: 0.9 }));
    const back = law.step({ t, u: 0.76 });
    return { before, first: seen[0]!, second: seen[1], back };
  };

  it('acts on a spike at the second sample that sees it: a jump that persists', () => {
    const { before, first, second } = afterJump();
    assert.equal(before, 0.8);
    assert.ok(second!.uhat >= 0.85 - 1e-9, `uhat ${second!.uhat}`);
    assert.ok(second!.m <= 0.5, `m ${second!.m}`);
    // The first sample alone is no jump yet: the 1.5 s filter and the slope move m one grid
    // step at most on it, and the filter alone two on the second.
    assert.ok(first.m >= 0.75, `first sample: m ${first.m}`);
    const off = afterJump({ jumpU: 1e9 }).second!;
    assert.ok(off.m >= 0.7 - 1e-9, `filter alone: m ${off.m}`);
  });

  it('does not act on one high sample (a read in the middle of a collection)', () => {
    const { first, back } = afterJump({}, 1);
    assert.ok(first.m >= 0.75, `m ${first.m}`);
    assert.ok(back.m >= 0.75, `m ${back.m}`);
  });

  it('is never tripped by noise, and a ramp is predicted above its samples anyway', () => {
    const law = createLeadLaw();
    let t = 0;
    let x = 1;
    for (; t < 60; t += 0.05) {
      x = (x * 48271) % 2147483647; // a fixed pseudo-random sequence: ±1% around 0.76
      const u = 0.76 + 0.02 * (x / 2147483647 - 0.5);
      const out = law.step({ t, u });
      assert.ok(out.uhat > u - 0.05 + 0.02, `noise reached the jump margin at ${t}`);
    }
    const ramp = createLeadLaw();
    for (t = 0; t < 10; t += 0.05) {
      const u = 0.5 + 0.04 * t;
      const out = ramp.step({ t, u });
      if (t > 5) assert.ok(out.uhat > u, `the prediction leads the ramp at ${t}`);
    }
  });
});

describe('PID comparison law (the relay report’s own) on the same plant', BOUND, () => {
  it('overshoots far more, stays above target, and latches emergency', () => {
    const ours = leadRun.summary;
    const theirs = pidRun.summary;
    assert.ok(theirs.peakU > ours.peakU + 0.2, `pid ${theirs.peakU} vs lead ${ours.peakU}`);
    assert.ok(theirs.peakOverBandTop > 1.05);
    assert.ok(theirs.timeAboveTargetSec > 60, `pid above target ${theirs.timeAboveTargetSec} s`);
    assert.ok(theirs.emergencyEntries > ours.emergencyEntries);
    assert.ok(theirs.steadyU > 1, `pid holds memory above target (${theirs.steadyU})`);
  });

  it('does not act below about 1.2 x target: the 0.7 memory weight', () => {
    const pid = createPidLaw();
    let t = 0;
    for (; t < 30; t += TICK) pid.step({ t, u: 0.5 }); // idle: the integral sinks to its floor
    for (; t < 90; t += TICK) {
      assert.equal(pid.step({ t, u: 1.15 }).m, 1, `no throttling at u = 1.15 (t = ${t})`);
    }
    let m = 1;
    for (; t < 150; t += TICK) m = pid.step({ t, u: 1.3 }).m;
    assert.ok(m < 1, 'throttles above 1.21');
  });

  it('maps its delay to the share a delayed writer keeps', () => {
    assert.equal(delayToMultiplier(0, 10), 1);
    assert.equal(delayToMultiplier(0.1, 10), 0.5);
    assert.ok(Math.abs(delayToMultiplier(5, 10) - 1 / 51) < 1e-12);
  });
});

describe('emergency latch', BOUND, () => {
  it('clears within dwell + one tick with zero traffic, evaluated on the tick alone', () => {
    const target = DEFAULT_PLANT_PARAMS.targetBytes;
    // u starts at 1.15 (baseline 0.6 + backlog 0.55), nothing is offered: the backlog drains
    // at 8 MiB/s and u crosses uExit = 0.9 at exactly 0.25 x 1 GiB / 8 MiB/s = 32 s.
    const quiet: Scenario = { name: 'no traffic', load: () => ({ offeredBytesPerSec: 0 }) };
    const r = run(
      createLeadLaw(),
      { initialBacklogBytes: 0.55 * target },
      { durationSec: 60 },
      quiet,
    );
    const crossing = (0.25 * target) / DRAIN;
    assert.equal(r.series[0]!.mode, 'emergency');
    assert.ok(r.series.every((p) => p.admitted === 0));
    const exit = r.series.find((p) => p.mode === 'normal')!;
    assert.ok(exit.t >= crossing + lead.dwellSec, `left at ${exit.t}, too early`);
    assert.ok(exit.t <= crossing + lead.dwellSec + TICK, `left at ${exit.t}, too late`);
    assert.equal(r.summary.emergencyExits, 1);
  });

  it('holds between the thresholds, restarts the dwell on a bounce, then rises slowly', () => {
    const law = createLeadLaw();
    assert.equal(law.step({ t: 0, u: 1.12 }).mode, 'emergency');
    for (let t = 1; t <= 20; t++) {
      const out = law.step({ t, u: 1.0 });
      assert.equal(out.mode, 'emergency');
      assert.equal(out.m, lead.mMin);
    }
    for (const t of [21, 22, 23]) assert.equal(law.step({ t, u: 0.85 }).mode, 'emergency');
    assert.equal(law.step({ t: 24, u: 0.95 }).mode, 'emergency', 'bounce above uExit');
    for (const t of [25, 26, 27, 28, 29]) assert.equal(law.step({ t, u: 0.5 }).mode, 'emergency');
    const out = law.step({ t: 30, u: 0.5 });
    assert.equal(out.mode, 'normal', 'uExit held for the dwell since t = 25');
    assert.equal(out.emergencyEntries, 1);
    let previous = out.m;
    for (let t = 31; t <= 45; t++) {
      const m = law.step({ t, u: 0.5 }).m;
      assert.ok(m - previous <= lead.rUpPerSec + 1e-9, `rose ${m - previous} in 1 s`);
      previous = m;
    }
    assert.equal(previous, 1);
  });
});

describe('published value', BOUND, () => {
  it('publishes values on the grid within [mMin, 1], back at 1 after the overload', () => {
    for (const p of leadRun.series) {
      assert.ok(p.m >= lead.mMin && p.m <= 1 && onGrid(p.m), `m ${p.m} at ${p.t}`);
    }
    assert.equal(leadRun.series.at(-1)!.m, 1);
  });

  it('does not chatter under 1% sampling noise', () => {
    const noisy = run(createLeadLaw(), { noise: 0.01 });
    const fine = run(createLeadLaw({ quantum: 0.001, deadband: 0 }), { noise: 0.01 });
    const s = noisy.summary;
    const changes: { t: number; up: boolean }[] = [];
    const window = noisy.series.filter((p) => p.t >= s.window.from && p.t < s.window.to);
    window.forEach((p, i) => {
      const before = window[i - 1];
      if (before && p.m !== before.m) changes.push({ t: p.t, up: p.m > before.m });
    });
    assert.ok(s.mChanges <= 12, `${s.mChanges} changes in 120 s`);
    assert.ok(s.mPeakToPeak <= lead.quantum + 1e-9, `m peak-to-peak ${s.mPeakToPeak}`);
    for (let i = 1; i < changes.length; i++) {
      const [a, b] = [changes[i - 1]!, changes[i]!];
      assert.ok(a.up === b.up || b.t - a.t >= 5, `reversed within ${b.t - a.t} s at ${b.t}`);
    }
    assert.ok(fine.summary.mChanges > 10 * s.mChanges, `${fine.summary.mChanges} unquantised`);
  });

  it('drops at once, rises only past the deadband', () => {
    assert.equal(quantiseWithDeadband(0.5, 0.449, 0.05, 0.05, 0.05), 0.4);
    assert.equal(quantiseWithDeadband(0.4, 0.49, 0.05, 0.05, 0.05), 0.4);
    assert.equal(quantiseWithDeadband(0.4, 0.5, 0.05, 0.05, 0.05), 0.45);
    assert.equal(quantiseWithDeadband(0.4, 0.62, 0.05, 0.05, 0.05), 0.55);
    assert.equal(quantiseWithDeadband(0.9, 1, 0.05, 0.05, 0.05), 1);
    assert.equal(quantiseWithDeadband(0.3, 0.01, 0.05, 0.05, 0.05), 0.05);
  });
});

describe('time handling', BOUND, () => {
  it('filters by time: the same step response at any tick, regular or not', () => {
    const at = 4;
    const expected = 1 - 0.5 * Math.exp(-at / lead.tauSec);
    const ticks: number[][] = [[0.25], [1], [0.1, 0.7, 0.05, 1.3, 0.35]];
    for (const pattern of ticks) {
      const law = createLeadLaw({ leadSec: 0 }); // uhat is then the filtered u itself
      law.step({ t: 0, u: 0.5 });
      let t = 0;
      let uhat = 0;
      for (let i = 0; t < at; i++) {
        t = Math.min(at, t + pattern[i % pattern.length]!);
        uhat = law.step({ t, u: 1 }).uhat;
      }
      assert.ok(
        Math.abs(uhat - expected) < 1e-9,
        `ticks ${pattern.join(', ')}: ${uhat} vs ${expected}`,
      );
    }
  });

  it('starts from the first sample, ignores a repeated instant, refuses time going back', () => {
    const law = createLeadLaw();
    const first = law.step({ t: 100, u: 0.85 });
    assert.equal(first.uhat, 0.85, 'first step: no history, no slope');
    assert.equal(first.m, 0.5, 'the map applies at once: 1 - 0.95 x 0.5 = 0.525 -> 0.5');
    const again = law.step({ t: 100, u: 0.5 });
    assert.equal(again.uhat, 0.85, 'dt = 0 moves no filter');
    assert.equal(again.m, 0.5, 'and raises nothing');
    assert.throws(() => law.step({ t: 99, u: 0.5 }), RangeError);
    assert.throws(() => law.step({ t: 101, u: Number.NaN }), RangeError);
  });

  it('drops at once on a jump to emergency even within the same instant', () => {
    const law = createLeadLaw();
    law.step({ t: 0, u: 0.5 });
    const out = law.step({ t: 0, u: 1.2 });
    assert.equal(out.mode, 'emergency');
    assert.equal(out.m, lead.mMin);
  });
});

describe('backlog term (the workflow engine’s proportional law)', BOUND, () => {
  const params = { acceptableBacklogBytes: 64 * MiB, baseBytesPerSec: 24 * MiB, mMin: 0.05 };

  it('is proportional to acceptable / backlog with the drain as feed-forward', () => {
    const drain = 8 * MiB;
    assert.equal(backlogMultiplier({ bytes: 64 * MiB, drainBytesPerSec: drain }, params), 1 / 3);
    assert.equal(backlogMultiplier({ bytes: 128 * MiB, drainBytesPerSec: drain }, params), 1 / 6);
    assert.equal(backlogMultiplier({ bytes: 16 * MiB, drainBytesPerSec: drain }, params), 1);
    // Under half the acceptable backlog the limit goes back to the maximum, even when
    // acceptable / backlog x drain / base would still be below 1.
    assert.equal(backlogMultiplier({ bytes: 31 * MiB, drainBytesPerSec: 2 * MiB }, params), 1);
    assert.equal(backlogMultiplier({ bytes: 32 * MiB, drainBytesPerSec: 2 * MiB }, params), 1 / 6);
    assert.equal(
      backlogMultiplier({ bytes: 64 * 1024 * MiB, drainBytesPerSec: drain }, params),
      0.05,
    );
  });

  it('never reads "no data" as maximum pressure', () => {
    assert.equal(backlogMultiplier(undefined, params), 1);
    assert.equal(backlogMultiplier({ bytes: 10 * 1024 * MiB, drainBytesPerSec: 0 }, params), 1);
    assert.equal(backlogMultiplier({ bytes: 0, drainBytesPerSec: 0 }, params), 1);
    const law = createLeadLaw(params);
    const out = law.step({
      t: 0,
      u: 0.5,
      backlog: { bytes: 10 * 1024 * MiB, drainBytesPerSec: 0 },
    });
    assert.equal(out.m, 1);
  });

  it('holds the backlog near the acceptable value when the drain degrades', () => {
    // Memory has room (baseline 30%), so the memory law alone waits for the backlog to
    // reach the band; with the backlog term the writes follow the degraded drain at once.
    const degraded: Scenario = {
      name: 'degraded drain',
      overload: { from: 30, to: 210 },
      load: (t) => ({
        offeredBytesPerSec: 0.9 * DRAIN,
        drainBytesPerSec: t >= 30 && t < 210 ? DRAIN / 4 : DRAIN,
      }),
    };
    const plant = { baselineBytes: 0.3 * DEFAULT_PLANT_PARAMS.targetBytes };
    const withTerm = run(createLeadLaw(params), plant, { feedBacklog: true }, degraded);
    const without = run(createLeadLaw(), plant, { feedBacklog: true }, degraded);
    const maxBacklog = (r: SimResult) =>
      Math.max(...r.series.filter((p) => p.t >= 150 && p.t < 210).map((p) => p.backlogBytes));
    assert.ok(
      maxBacklog(withTerm) <= 1.5 * params.acceptableBacklogBytes,
      `${maxBacklog(withTerm)}`,
    );
    assert.ok(maxBacklog(without) >= 4 * params.acceptableBacklogBytes, `${maxBacklog(without)}`);
    assert.ok(withTerm.summary.acceptedRatio >= 0.85, `${withTerm.summary.acceptedRatio}`);
    assert.equal(withTerm.summary.emergencyEntries, 0);
  });
});
