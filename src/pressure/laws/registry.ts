/**
 * Every control law, in the report's order: what the feed runs (`sluice feed --law`), which
 * parameters the admin endpoint accepts for it, what the benchmark's adaptive arms and the
 * report call it, and whether test/unit/pressure/law.test.ts holds it to the closed-loop
 * targets. Adding a law is its rule in `<name>-law.ts` and a line here.
 */
import type { ControlLaw } from './law.js';
import { DEFAULT_LEAD_LAW_PARAMS, createLeadLaw } from './lead-law.js';
import { DEFAULT_PID_LAW_PARAMS, createPidLaw } from './pid-law.js';

/** Parameter overrides by name (flags, the admin endpoint), checked by the law's make. */
export type LawOverrides = Record<string, number | undefined>;

export interface LawEntry {
  /** What it does, for `sluice feed --help`. */
  description: string;
  /** Its name in the report. */
  label: string;
  /** Its own parameters with their defaults (every law also takes BACKLOG_PARAMS). */
  defaults: object;
  /** A law from overrides of its defaults; throws RangeError on values it refuses. */
  make(params: LawOverrides): ControlLaw;
  /** Held to every closed-loop target in simulated time; false: kept to compare with. */
  heldToTargets: boolean;
}

export const LAWS = {
  pid: {
    description: "the relay report's PID limiter, kept to compare with",
    label: 'reference PID',
    defaults: DEFAULT_PID_LAW_PARAMS,
    make: createPidLaw,
    heldToTargets: false,
  },
  lead: {
    description: 'filtered memory and its slope, a look-ahead, a band, an emergency latch',
    label: 'sluice lead law',
    defaults: DEFAULT_LEAD_LAW_PARAMS,
    make: createLeadLaw,
    heldToTargets: true,
  },
} as const satisfies Record<string, LawEntry>;

export type LawName = keyof typeof LAWS;
export const LAW_NAMES = Object.keys(LAWS) as [LawName, ...LawName[]];
/** The law a feed runs unless told otherwise. */
export const DEFAULT_LAW: LawName = 'lead';

/** The backlog term's parameters, which the feed hands to whichever law it runs. */
export const BACKLOG_PARAMS = ['acceptableBacklogBytes', 'baseBytesPerSec'] as const;

/** Every parameter the law takes by name: its own and the backlog term's. */
export function paramsOf(name: LawName): Set<string> {
  return new Set([...Object.keys(LAWS[name].defaults), ...BACKLOG_PARAMS]);
}
