import type { ControlLaw, Mode } from '../pressure/laws/law.js';
import type { TickPace } from '../pressure/feed/tick-pace.js';
import { seededRandom } from '../util/random.js';

/**
 * A deterministic simulated relay node, to run control laws in simulated time: memory =
 * baseline + backlog + spikes, the backlog grows with admitted write bytes and drains at a
 * set rate, and writes are admitted up to base x m, where m reaches the gateways only after
 * a propagation delay. Used by the law tests and by the benchmark's simulated runs.
 */

export interface PlantParams {
  /** Memory target of the node (bytes): u = memory / target. */
  targetBytes: number;
  /** Memory the node holds with no backlog (bytes). */
  baselineBytes: number;
  /** What the node drains (bytes/s): the write rate it can sustain. */
  drainBytesPerSec: number;
  /** Write rate that m = 1 admits (bytes/s), all clients together. */
  baseBytesPerSec: number;
  /** Time from a published m to the gateways enforcing it (s). */
  delaySec: number;
  initialBacklogBytes: number;
  /** Integration step (s); each step(dt) is cut into pieces no longer than this. */
  substepSec: number;
  /** Amplitude of uniform noise on the observed u (0 = none); the true u stays clean. */
  noise: number;
  /**
   * Allocation noise of a garbage-collected relay, in the true memory (the kernel counts it):
   * garbage grows with the bytes admitted, `bytes` per byte admitted, ...
   */
  garbagePerByte: number;
  /** ... up to this many bytes (the saw-tooth's height), where a collection frees it all; */
  garbageMaxBytes: number;
  /** and a collection comes early, at random, this often (per second; 0 = never). */
  gcDropsPerSec: number;
  /**
   * A heap or buffer pool that grows with the first writes and is never given back: `per
   * byte` admitted, up to `max` bytes. Memory the node holds whatever the write rate.
   */
  poolPerByte: number;
  poolMaxBytes: number;
  seed: number;
}

export const DEFAULT_PLANT_PARAMS: Readonly<PlantParams> = {
  targetBytes: 1024 * 1024 * 1024,
  baselineBytes: 0.6 * 1024 * 1024 * 1024,
  drainBytesPerSec: 8 * 1024 * 1024,
  baseBytesPerSec: 24 * 1024 * 1024,
  delaySec: 1,
  initialBacklogBytes: 0,
  substepSec: 0.05,
  noise: 0,
  garbagePerByte: 0,
  garbageMaxBytes: 0,
  gcDropsPerSec: 0,
  poolPerByte: 0,
  poolMaxBytes: 0,
  seed: 1,
};

/** What the outside world does to the node; held until the next setLoad. */
export interface PlantLoad {
  offeredBytesPerSec: number;
  /** Memory held by something other than writes (bytes), such as a store that balloons. */
  spikeBytes?: number;
  /** A drain slower (or faster) than the configured one, such as a degraded disk. */
  drainBytesPerSec?: number;
}

export interface PlantState {
  t: number;
  /** What a sampler sees: the true ratio plus observation noise. */
  u: number;
  /** memory / target, without noise. */
  uTrue: number;
  /**
   * What the law can act on: memory less the collector's garbage, / target (uTrue when the
   * plant has none). Oscillation and settling are judged on it; peaks on uTrue.
   */
  uLive: number;
  memoryBytes: number;
  backlogBytes: number;
}

export interface PlantStep extends PlantState {
  /** Highest true u within the step. */
  uPeak: number;
  /** Time within the step with memory above target (s). */
  aboveTargetSec: number;
  /** Means over the step (bytes/s). */
  offeredBytesPerSec: number;
  admittedBytesPerSec: number;
  drainedBytesPerSec: number;
  /** What the node could take without its backlog growing: min(offered, drain). */
  sustainableBytesPerSec: number;
  /** The multiplier in force at the end of the step. */
  mApplied: number;
}

export interface Plant {
  readonly params: Readonly<PlantParams>;
  setLoad(load: PlantLoad): void;
  observe(): PlantState;
  /** Publish m now and advance dt seconds; returns the state at the end. */
  step(dtSec: number, m: number): PlantStep;
}

export function createPlant(params: Partial<PlantParams> = {}): Plant {
  const p: PlantParams = { ...DEFAULT_PLANT_PARAMS, ...params };
  for (const key of ['targetBytes', 'drainBytesPerSec', 'baseBytesPerSec', 'substepSec'] as const) {
    if (!(p[key] > 0)) throw new RangeError(`plant: ${key} must be > 0, got ${p[key]}`);
  }
  const random = seededRandom(p.seed);
  let t = 0;
  let backlog = p.initialBacklogBytes;
  let load: Required<PlantLoad> = {
    offeredBytesPerSec: 0,
    spikeBytes: 0,
    drainBytesPerSec: p.drainBytesPerSec,
  };
  // Published multipliers in order; the first is in force until the next one arrives.
  const pending: { at: number; m: number }[] = [{ at: -Infinity, m: 1 }];
  let noise = 0;
  let garbage = 0;
  let pool = 0;

  const memory = () => p.baselineBytes + backlog + garbage + pool + load.spikeBytes;
  const state = (): PlantState => {
    const uTrue = memory() / p.targetBytes;
    return {
      t,
      u: Math.max(0, uTrue + noise),
      uTrue,
      uLive: (memory() - garbage) / p.targetBytes,
      memoryBytes: memory(),
      backlogBytes: backlog,
    };
  };
  const inForce = (at: number): number => {
    while (pending.length > 1 && pending[1]!.at <= at - p.delaySec) pending.shift();
    return pending[0]!.m;
  };

  return {
    params: p,
    setLoad(next: PlantLoad): void {
      load = {
        offeredBytesPerSec: Math.max(0, next.offeredBytesPerSec),
        spikeBytes: Math.max(0, next.spikeBytes ?? 0),
        drainBytesPerSec: Math.max(0, next.drainBytesPerSec ?? p.drainBytesPerSec),
      };
    },
    observe: state,
    step(dtSec: number, m: number): PlantStep {
      if (!(dtSec >= 0)) throw new RangeError(`plant: dt must be >= 0, got ${dtSec}`);
      pending.push({ at: t, m });
      const pieces = Math.max(1, Math.ceil(dtSec / p.substepSec - 1e-9));
      const h = dtSec / pieces;
      let admitted = 0;
      let drained = 0;
      let uPeak = memory() / p.targetBytes;
      let aboveTargetSec = 0;
      for (let i = 0; i < pieces; i++) {
        const rate = Math.min(load.offeredBytesPerSec, p.baseBytesPerSec * inForce(t + i * h));
        backlog += rate * h;
        if (p.garbageMaxBytes > 0) {
          garbage += p.garbagePerByte * rate * h;
          const early = p.gcDropsPerSec > 0 && random() < p.gcDropsPerSec * h;
          if (garbage >= p.garbageMaxBytes || early) garbage = 0;
        }
        pool = Math.min(p.poolMaxBytes, pool + p.poolPerByte * rate * h);
        const out = Math.min(backlog, load.drainBytesPerSec * h);
        backlog -= out;
        admitted += rate * h;
        drained += out;
        const u = memory() / p.targetBytes;
        uPeak = Math.max(uPeak, u);
        if (u > 1) aboveTargetSec += h;
      }
      t += dtSec;
      noise = p.noise > 0 ? p.noise * (2 * random() - 1) : 0;
      const per = (bytes: number) => (dtSec > 0 ? bytes / dtSec : 0);
      return {
        ...state(),
        uPeak,
        aboveTargetSec,
        offeredBytesPerSec: load.offeredBytesPerSec,
        admittedBytesPerSec: per(admitted),
        drainedBytesPerSec: per(drained),
        sustainableBytesPerSec: Math.min(load.offeredBytesPerSec, load.drainBytesPerSec),
        mApplied: inForce(t),
      };
    },
  };
}

/** The load over time, and the overload phase the summary looks at. */
export interface Scenario {
  name: string;
  load(t: number): PlantLoad;
  overload?: { from: number; to: number };
}

export interface OverloadStepOptions {
  /** The drain rate the factor multiplies (bytes/s). */
  sustainableBytesPerSec: number;
  /** Offered load during the overload, as a multiple of the sustainable rate. */
  factor: number;
  /** Offered load before and after, as a multiple of the sustainable rate. */
  quietFactor: number;
  startSec: number;
  overloadSec: number;
  spikes?: { atSec: number; bytes: number; holdSec: number }[];
}

/** A step from quiet load to `factor` x the sustainable rate and back. */
export function overloadStep(o: OverloadStepOptions): Scenario {
  const end = o.startSec + o.overloadSec;
  return {
    name: `${o.factor}x overload step`,
    overload: { from: o.startSec, to: end },
    load(t: number): PlantLoad {
      const on = t >= o.startSec && t < end;
      const spikeBytes = (o.spikes ?? [])
        .filter((s) => t >= s.atSec && t < s.atSec + s.holdSec)
        .reduce((sum, s) => sum + s.bytes, 0);
      return {
        offeredBytesPerSec: o.sustainableBytesPerSec * (on ? o.factor : o.quietFactor),
        spikeBytes,
      };
    },
  };
}

export interface SimPoint {
  t: number;
  /** True memory ratio at t (what the peak and time above target use). */
  u: number;
  /** Memory less garbage at t (what settling and oscillation use). */
  uLive: number;
  uhat: number;
  m: number;
  mode: Mode;
  /** Means over the tick that starts at t (bytes/s). */
  admitted: number;
  sustainable: number;
  backlogBytes: number;
}

export interface SimOptions {
  tickSec: number;
  /** An adaptive pace, as the feed runs it: each tick's length from the law's output. */
  pace?: TickPace;
  durationSec: number;
  /** Ticks vary by up to this fraction of tickSec, seeded (0 = regular). */
  tickJitter?: number;
  jitterSeed?: number;
  /** Hand the law the backlog and the measured drain rate too. */
  feedBacklog?: boolean;
  /** The band's top, for the overshoot figure (1 = the target). */
  bandTop?: number;
  /** Oscillation and acceptance are measured over the overload's last this many seconds. */
  windowSec?: number;
  /** Settled means within this fraction of the steady u ... */
  settleTolerance?: number;
  /** ... where the steady u is the mean over the overload's last this many seconds. */
  steadySec?: number;
}

export interface SimSummary {
  peakU: number;
  /** peakU / bandTop: 1.05 is a 5% overshoot over the band's top. */
  peakOverBandTop: number;
  timeAboveTargetSec: number;
  emergencyEntries: number;
  emergencyExits: number;
  /** Admitted / sustainable bytes over the window. */
  acceptedRatio: number;
  mPeakToPeak: number;
  uPeakToPeak: number;
  /** Published changes of m over the window. */
  mChanges: number;
  steadyU: number;
  /** Seconds from the overload's start until u stays within tolerance of steady; null: never. */
  settleSec: number | null;
  window: { from: number; to: number };
}

export interface SimResult {
  law: string;
  scenario: string;
  series: SimPoint[];
  summary: SimSummary;
}

/** Run a law against a plant on the tick, the way the feed will, and summarise. */
export function simulate(
  law: ControlLaw,
  plant: Plant,
  scenario: Scenario,
  options: SimOptions,
): SimResult {
  const o = {
    tickJitter: 0,
    jitterSeed: 7,
    feedBacklog: false,
    bandTop: 1,
    windowSec: 120,
    settleTolerance: 0.05,
    steadySec: 30,
    ...options,
  };
  const jitter = seededRandom(o.jitterSeed);
  const series: SimPoint[] = [];
  let peakU = 0;
  let timeAboveTargetSec = 0;
  let emergencyEntries = 0;
  let drained = 0;
  let t = 0;
  while (t < o.durationSec - 1e-9) {
    plant.setLoad(scenario.load(t));
    const seen = plant.observe();
    const backlog = o.feedBacklog
      ? {
          bytes: seen.backlogBytes,
          drainBytesPerSec: drained,
          targetBytes: plant.params.targetBytes,
        }
      : undefined;
    const out = law.step({ t, u: seen.u, backlog });
    emergencyEntries = out.emergencyEntries;
    const tickSec = o.pace ? o.pace.update(out) / 1000 : o.tickSec;
    const dt = Math.min(tickSec * (1 + o.tickJitter * (2 * jitter() - 1)), o.durationSec - t);
    const next = plant.step(dt, out.m);
    drained = next.drainedBytesPerSec;
    peakU = Math.max(peakU, next.uPeak);
    timeAboveTargetSec += next.aboveTargetSec;
    series.push({
      t,
      u: seen.uTrue,
      uLive: seen.uLive,
      uhat: out.uhat,
      m: out.m,
      mode: out.mode,
      admitted: next.admittedBytesPerSec,
      sustainable: next.sustainableBytesPerSec,
      backlogBytes: seen.backlogBytes,
    });
    t = next.t;
  }
  const summary = summarise(series, scenario, o, { peakU, timeAboveTargetSec, emergencyEntries });
  return { law: law.name, scenario: scenario.name, series, summary };
}

function summarise(
  series: SimPoint[],
  scenario: Scenario,
  o: Required<Omit<SimOptions, 'tickSec' | 'durationSec' | 'pace'>> & { durationSec: number },
  totals: { peakU: number; timeAboveTargetSec: number; emergencyEntries: number },
): SimSummary {
  const phase = scenario.overload ?? { from: 0, to: o.durationSec };
  const window = { from: Math.max(phase.from, phase.to - o.windowSec), to: phase.to };
  const spread = (xs: number[]) => (xs.length ? Math.max(...xs) - Math.min(...xs) : 0);
  const inWindow: SimPoint[] = [];
  let accepted = 0;
  let sustainable = 0;
  let mChanges = 0;
  series.forEach((s, i) => {
    if (s.t < window.from || s.t >= window.to) return;
    const dt = Math.min(series[i + 1]?.t ?? o.durationSec, window.to) - s.t;
    accepted += s.admitted * dt;
    sustainable += s.sustainable * dt;
    const previous = inWindow.at(-1);
    if (previous && previous.m !== s.m) mChanges++;
    inWindow.push(s);
  });
  const steadyFrom = phase.to - o.steadySec;
  const steadyPoints = series.filter((s) => s.t >= steadyFrom && s.t < phase.to);
  const steadyU = steadyPoints.reduce((sum, s) => sum + s.uLive, 0) / (steadyPoints.length || 1);
  const inPhase = series.filter((s) => s.t >= phase.from && s.t < phase.to);
  let settledAt: number | null = null;
  for (const s of inPhase) {
    if (Math.abs(s.uLive - steadyU) > o.settleTolerance * steadyU) settledAt = null;
    else settledAt ??= s.t;
  }
  const settleSec = settledAt !== null && settledAt <= steadyFrom ? settledAt - phase.from : null;
  let emergencyExits = 0;
  for (let i = 1; i < series.length; i++) {
    if (series[i - 1]!.mode === 'emergency' && series[i]!.mode === 'normal') emergencyExits++;
  }
  return {
    peakU: totals.peakU,
    peakOverBandTop: totals.peakU / o.bandTop,
    timeAboveTargetSec: totals.timeAboveTargetSec,
    emergencyEntries: totals.emergencyEntries,
    emergencyExits,
    acceptedRatio: sustainable > 0 ? accepted / sustainable : 1,
    mPeakToPeak: spread(inWindow.map((s) => s.m)),
    uPeakToPeak: spread(inWindow.map((s) => s.uLive)),
    mChanges,
    steadyU,
    settleSec,
    window,
  };
}
