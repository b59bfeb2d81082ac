/**
 * The OOM benchmark's figures, as pure functions of what a run recorded: lost-event
 * accounting, memory against the limit and the target, accepted writes against what the relay
 * sustains, answers by kind, the targets, and the markdown table.
 */
import type { Variant } from '../run/adaptive-gateways.js';
import type { Acked, FloodCounts, FloodShape } from './flood.js';

export interface OomSample {
  /** Seconds since the flood's start (calm phase included). */
  t: number;
  workingSetBytes: number;
  usageBytes: number;
  /** Of the working set: anonymous memory, and file pages in active use. */
  anonBytes: number;
  activeFileBytes: number;
  oomKills: number;
  /** What the first gateway applied to the node (null: it did not answer). */
  multiplier: number | null;
  emergency: boolean | null;
  /** Events acknowledged so far. */
  acked: number;
}

export interface LostAccounting {
  acked: number;
  found: number;
  lost: number;
  /** Lost events by the kill that took them: the first death at or after their ack. */
  lostPerDeath: number[];
  /** Lost with no death after their ack: the final stop, or a relay that drops writes. */
  lostWithoutDeath: number;
}

/** Which acknowledged events the relay no longer has, and which death took each. */
export function lostEvents(
  acked: Acked[],
  found: ReadonlySet<string>,
  deaths: { t: number }[],
): LostAccounting {
  const times = deaths.map((d) => d.t).sort((a, b) => a - b);
  const lostPerDeath = times.map(() => 0);
  let lost = 0;
  let lostWithoutDeath = 0;
  for (const a of acked) {
    if (found.has(a.id)) continue;
    lost++;
    const d = times.findIndex((t) => t >= a.t);
    if (d === -1) lostWithoutDeath++;
    else lostPerDeath[d]!++;
  }
  return { acked: acked.length, found: acked.length - lost, lost, lostPerDeath, lostWithoutDeath };
}

/** Acknowledged writes per second in [from, to) seconds, from their ack times. */
export function ackRate(acked: Acked[], from: number, to: number): number {
  if (!(to > from)) return 0;
  return acked.filter((a) => a.t >= from && a.t < to).length / (to - from);
}

/** Seconds the samples spent above `bytes` (each sample stands for the time since the last). */
export function secondsAbove(samples: OomSample[], bytes: number): number {
  let s = 0;
  for (let i = 1; i < samples.length; i++) {
    if (samples[i]!.workingSetBytes > bytes) s += samples[i]!.t - samples[i - 1]!.t;
  }
  return s;
}

export interface Responses {
  ok2xx: number;
  limited429: number;
  server5xx: number;
  /** Other refusals: 4xx other than 429, or 2xx / OK false for another reason. */
  otherRefused: number;
  /** No answer: connection errors, closes, timeouts. */
  errors: number;
  /** Due but not sent: the flood's in-flight bound was full. */
  unsent: number;
}

export function responsesOf(c: FloodCounts): Responses {
  return {
    ok2xx: c.ok,
    limited429: c.limited,
    server5xx: c.server,
    otherRefused: c.refused + c.client,
    errors: c.error,
    unsent: c.unsent,
  };
}

export interface ArmFrame {
  idleBytes: number;
  limitBytes: number;
  targetBytes: number;
  sustainablePerSec: number;
  calmSec: number;
  floodSec: number;
}

export interface ArmSummary {
  oomKills: number;
  ackedEvents: number;
  ackedLost: number;
  peakWorkingSetBytes: number;
  peakOverLimit: number;
  peakOverTarget: number;
  secondsAboveTarget: number;
  /** Acknowledged writes per second over the whole flood (the calm phase left out). */
  acceptedPerSec: number;
  acceptedShareOfSustainable: number;
  /** The same over the flood's second half, once the loop has settled. */
  settledAcceptedShareOfSustainable: number;
  responses: Responses;
}

export function summarizeArm(
  frame: ArmFrame,
  samples: OomSample[],
  acked: Acked[],
  counts: FloodCounts,
  lost: LostAccounting,
  finalKills: number,
): ArmSummary {
  const peak = Math.max(0, ...samples.map((s) => s.workingSetBytes));
  const end = frame.calmSec + frame.floodSec;
  const accepted = ackRate(acked, frame.calmSec, end);
  const settled = ackRate(acked, frame.calmSec + frame.floodSec / 2, end);
  return {
    oomKills: finalKills,
    ackedEvents: lost.acked,
    ackedLost: lost.lost,
    peakWorkingSetBytes: peak,
    peakOverLimit: peak / frame.limitBytes,
    peakOverTarget: peak / frame.targetBytes,
    secondsAboveTarget: secondsAbove(samples, frame.targetBytes),
    acceptedPerSec: accepted,
    acceptedShareOfSustainable: accepted / frame.sustainablePerSec,
    settledAcceptedShareOfSustainable: settled / frame.sustainablePerSec,
    responses: responsesOf(counts),
  };
}

/** The targets for an adaptive arm, each held or not. */
export interface Targets {
  noKills: boolean;
  noAckedLost: boolean;
  peakAtMostTarget: boolean;
  acceptedAtLeast85: boolean;
  onlyRateLimits: boolean;
}

export function targetsOf(s: ArmSummary): Targets {
  return {
    noKills: s.oomKills === 0,
    noAckedLost: s.ackedLost === 0,
    peakAtMostTarget: s.peakOverTarget <= 1.0,
    acceptedAtLeast85: s.settledAcceptedShareOfSustainable >= 0.85,
    onlyRateLimits:
      s.responses.server5xx === 0 && s.responses.errors === 0 && s.responses.otherRefused === 0,
  };
}

export function allMet(t: Targets): boolean {
  return Object.values(t).every(Boolean);
}

export interface ArmRow {
  relay: string;
  flood: FloodShape;
  variant: Variant;
  /** The node's write budget in the arm: configured, learned by the feed, or none. */
  budget?: string;
  summary: ArmSummary;
}

const VARIANT_NAMES: Record<Variant, string> = {
  none: 'none',
  pid: 'reference PID',
  lead: 'lead law',
};

const FLOOD_NAMES: Record<FloodShape, string> = {
  heavy: 'one heavy writer',
  spam: 'spam wave',
};

const n = (x: number) => x.toLocaleString('en-US');

/** The markdown table of a session: one row per relay, flood and arm. */
export function markdownTable(rows: ArmRow[]): string {
  const lines = [
    '| relay | flood | adaptation | write budget | OOM kills | acked, lost | peak / limit | peak / target | s above target | accepted / sustainable (settled) | 2xx | 429 | 5xx | errors | other |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|',
  ];
  for (const r of rows) {
    const s = r.summary;
    const x = s.responses;
    lines.push(
      `| ${r.relay} | ${FLOOD_NAMES[r.flood]} | ${VARIANT_NAMES[r.variant]} | ${r.budget ?? '-'} | ${s.oomKills} | ` +
        `${n(s.ackedEvents)}, ${n(s.ackedLost)} | ${s.peakOverLimit.toFixed(2)} | ` +
        `${s.peakOverTarget.toFixed(2)} | ${s.secondsAboveTarget.toFixed(1)} | ` +
        `${s.acceptedShareOfSustainable.toFixed(2)} (${s.settledAcceptedShareOfSustainable.toFixed(2)}) | ` +
        `${n(x.ok2xx)} | ${n(x.limited429)} | ${n(x.server5xx)} | ${n(x.errors)} | ` +
        `${n(x.otherRefused + x.unsent)} |`,
    );
  }
  return lines.join('\n');
}
