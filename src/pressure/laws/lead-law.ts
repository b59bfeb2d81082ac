import {
  backlogMultiplier,
  EmergencyLatch,
  ewmaWeight,
  quantiseWithDeadband,
  lawOf,
} from './law.js';
import type { ControlLaw, LawInput, LawOutput } from './law.js';
import { PlateauProbe, bandMultiplier } from './plateau-probe.js';
import type { Band } from './plateau-probe.js';

/** A backlog of up to this share of the memory target still keeps up (see keepsUp). */
const KEEPING_UP_SHARE = 0.01;
/** A step that raised the window's mean multiplier by less than this is given back. */
const PROBE_MIN_GAIN_M = 0.005;
/** A rise of memory's mean over a window that answers a probe (u): a slow plant's answer. */
const PROBE_RISE_U = 0.004;
/** The longest wait between probes memory keeps answering (s). */
const PROBE_MAX_BACKOFF_SEC = 120;

/** The lead law's parameters. u is memory / target, so 1 is the target itself. */
export interface LeadLawParams {
  /** EWMA time constant on u (s): smooths sampling noise. */
  tauSec: number;
  /** EWMA time constant on the slope of the filtered u (s). */
  slopeTauSec: number;
  /** Look-ahead H (s): a rise is acted on where it will be H seconds from now. */
  leadSec: number;
  /**
   * A sample this far above the filtered u is a jump (a spike), not noise: the law acts on
   * the sample less this margin at once instead of waiting for the filter to catch up.
   */
  jumpU: number;
  /** Band bottom: full quota below it, with nothing learned. */
  uLo: number;
  /** Band top: the multiplier reaches mMin here. The target itself by default. */
  uHi: number;
  /**
   * The first step of a probe, as the multiplier it adds where memory is (each step that
   * holds doubles the next; 0: never probe, the band stays uLo-uHi). A probe raises the band's
   * bottom over a plateau of memory that writes do not move.
   */
  probeStepM: number;
  /** The window a probe step is judged over (s). */
  probeHoldSec: number;
  /**
   * 1: probe a relay that does not say whether it keeps up (no backlog input), judging by m
   * and memory alone; 0 (the default): only a relay whose backlog is under a second of its
   * drain is probed. Blind probes hold the flat plateau too, and cost smoothness on fast
   * plants (test/unit/pressure/law.test.ts shows both).
   */
  probeBlind: number;
  /** The narrowest the band gets by probing (u): the loop's gain is (1 - mMin) / width. */
  minBandU: number;
  /** Lowest multiplier, also the one held in emergency: a trickle, never a full stop. */
  mMin: number;
  /** Most the multiplier may rise per second; drops are immediate. */
  rUpPerSec: number;
  /** Grid of published values (the gateway holds one limiter per step). */
  quantum: number;
  /** How far past a higher grid line m must be before that line is published. */
  deadband: number;
  /** Enter emergency (m = mMin) when the raw u reaches this. */
  uEmerg: number;
  /** Leave emergency only after u <= uExit ... */
  uExit: number;
  /** ... has held for this long (s). */
  dwellSec: number;
  /** Backlog the relay may hold (bytes); with baseBytesPerSec it enables the backlog term. */
  acceptableBacklogBytes?: number;
  /** Write rate (bytes/s) that m = 1 admits, all clients together; the backlog term needs it. */
  baseBytesPerSec?: number;
}

/**
 * Defaults, tuned in simulated time for a 0.25-1 s tick and about 1 s from publication to
 * enforcement (test/unit/pressure/law.test.ts holds the evidence):
 * - band 0.7-1.0 (the notes start at 0.8): half the loop gain per unit of u, which keeps
 *   the loop from oscillating on a node whose memory fills at up to about 12% of its target
 *   per second, and keeps 1% sampling noise from moving m by more than a grid step. A 3x
 *   overload (m = 1/3) settles at u of about 0.9: under target, room left for spikes.
 * - tau 1.5 s, slope tau 1.5 s, H 3 s (the notes suggest 5-10 s): the look-ahead only has
 *   to cover the filter, the tick and the propagation. A longer one extrapolates a ramp the
 *   law has already cut, slams m to mMin, and the slow rise that follows starts a cycle.
 * - jumpU 0.05: five times the 1% sampling noise the rest is tuned for, so noise never
 *   trips it, and a ramp's prediction is above its samples anyway; a spike of 5% of the
 *   target or more moves m on the first sample that sees it (at 50 ms ticks the filter and
 *   the slope take 100-250 ms to move m one grid step on such a jump).
 * - rUp 0.1/s: 7 s from 1/3 back to 1, fast enough not to undershoot, slow enough to damp.
 * - quantum 0.05 (the gateway's grid), deadband one quantum: the published value changes
 *   every several seconds at most under noise, instead of flipping every tick.
 * - mMin 0.05: up to a 20x overload still settles inside the band.
 * - emergency at 1.10 x target (above the 5% overshoot budget, below the relay's own
 *   1.167), cleared at 0.90 held for 5 s.
 */
export const DEFAULT_LEAD_LAW_PARAMS: Readonly<LeadLawParams> = {
  tauSec: 1.5,
  slopeTauSec: 1.5,
  leadSec: 3,
  jumpU: 0.05,
  uLo: 0.7,
  uHi: 1.0,
  probeStepM: 0.1,
  probeHoldSec: 10,
  probeBlind: 0,
  minBandU: 0.05,
  mMin: 0.05,
  rUpPerSec: 0.1,
  quantum: 0.05,
  deadband: 0.05,
  uEmerg: 1.1,
  uExit: 0.9,
  dwellSec: 5,
};

function validate(p: LeadLawParams): void {
  const positive = ['tauSec', 'slopeTauSec', 'rUpPerSec', 'quantum', 'jumpU', 'minBandU'] as const;
  for (const key of positive) {
    if (!(p[key] > 0)) throw new RangeError(`lead law: ${key} must be > 0, got ${p[key]}`);
  }
  for (const key of [
    'leadSec',
    'deadband',
    'dwellSec',
    'probeStepM',
    'probeHoldSec',
    'probeBlind',
  ] as const) {
    if (!(p[key] >= 0)) throw new RangeError(`lead law: ${key} must be >= 0, got ${p[key]}`);
  }
  if (!(p.mMin > 0 && p.mMin < 1)) throw new RangeError(`lead law: mMin must be in (0, 1)`);
  if (!(p.uLo < p.uHi)) throw new RangeError(`lead law: uLo must be below uHi`);
  if (!(p.uExit < p.uEmerg)) throw new RangeError(`lead law: uExit must be below uEmerg`);
  if (!(p.uHi <= p.uEmerg)) throw new RangeError(`lead law: uHi must not exceed uEmerg`);
  const { acceptableBacklogBytes: acc, baseBytesPerSec: base } = p;
  if ((acc !== undefined && !(acc > 0)) || (base !== undefined && !(base > 0))) {
    throw new RangeError('lead law: acceptableBacklogBytes and baseBytesPerSec must be > 0');
  }
}

/**
 * The relay keeps up when its backlog is at most a second of its own drain, or 1% of the
 * memory target (a trickle of writes leaves an event or two waiting whatever the drain can
 * do); undefined: it does not say.
 */
function keepsUp(backlog: LawInput['backlog']): boolean | undefined {
  if (!backlog || !(backlog.bytes >= 0) || !(backlog.drainBytesPerSec >= 0)) return undefined;
  const slack = Math.max(backlog.drainBytesPerSec, KEEPING_UP_SHARE * (backlog.targetBytes ?? 0));
  return backlog.bytes <= slack;
}

/**
 * The recommended law of the pressure feed: filter u by time, predict rises, map the
 * prediction through a scaled trigger (no integral, so nothing winds up), drop at once and
 * rise slowly, publish on a grid with a deadband, and latch an emergency with hysteresis.
 * Against an integrating plant (memory grows with admitted minus drained bytes) a purely
 * proportional map already settles with writes equal to the drain: no integral is needed.
 */
export function createLeadLaw(params: Partial<LeadLawParams> = {}): ControlLaw {
  const p: LeadLawParams = { ...DEFAULT_LEAD_LAW_PARAMS, ...params };
  validate(p);
  const latch = new EmergencyLatch({ enterAt: p.uEmerg, exitAt: p.uExit, dwellSec: p.dwellSec });
  const backlogLaw =
    p.acceptableBacklogBytes !== undefined && p.baseBytesPerSec !== undefined
      ? {
          acceptableBacklogBytes: p.acceptableBacklogBytes,
          baseBytesPerSec: p.baseBytesPerSec,
          mMin: p.mMin,
        }
      : undefined;
  let started = false;
  let ubar = 0;
  let slope = 0;
  let m = 1;
  let published = 1;
  let jumpSeen = false;
  let band: Band = { lo: p.uLo, hi: p.uHi };
  const probe = new PlateauProbe({
    uLo: p.uLo,
    uHi: p.uHi,
    // A band configured narrower than minBandU keeps its own width.
    minWidthU: Math.min(p.minBandU, p.uHi - p.uLo),
    uCeil: p.uEmerg,
    firstStepM: p.probeStepM,
    windowSec: p.probeHoldSec,
    mMin: p.mMin,
    blind: p.probeBlind > 0,
    keepShare: 0.5,
    minGainM: PROBE_MIN_GAIN_M,
    riseU: PROBE_RISE_U,
    enoughM: 0.95,
    backoffSec: p.probeHoldSec,
    maxBackoffSec: PROBE_MAX_BACKOFF_SEC,
  });

  return lawOf('lead', (input: LawInput, dt: number): LawOutput => {
    const { t, u } = input;
    if (!started) {
      ubar = u;
      started = true;
    } else if (dt > 0) {
      const previous = ubar;
      ubar += ewmaWeight(dt, p.tauSec) * (u - ubar);
      slope += ewmaWeight(dt, p.slopeTauSec) * ((ubar - previous) / dt - slope);
    }
    // A jump well above the filter is acted on at once, less the margin noise never reaches,
    // once the next sample confirms it: one high sample is a read of the moment (a young
    // generation about to be collected), a spike is a jump that persists.
    const jumping = u - p.jumpU > ubar;
    const jump = jumping && jumpSeen;
    jumpSeen = jumping;
    // Anticipate rises only: a falling slope must not hand out quota before memory is back.
    const uhat = Math.max(ubar + Math.max(0, slope) * p.leadSec, jump ? u - p.jumpU : 0);
    const mMemory = bandMultiplier(uhat, band, p.mMin);
    band = probe.update(t, dt, ubar, mMemory, keepsUp(input.backlog));
    const mBacklog = backlogLaw ? backlogMultiplier(input.backlog, backlogLaw) : 1;
    const mode = latch.update(t, u);
    const goal = mode === 'emergency' ? p.mMin : Math.min(mMemory, mBacklog);
    m = goal < m ? goal : Math.min(goal, m + p.rUpPerSec * dt);
    published = quantiseWithDeadband(published, m, p.quantum, p.deadband, p.mMin);
    return { m: published, u, uhat, mode, emergencyEntries: latch.entries };
  });
}
