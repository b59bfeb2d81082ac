/**
 * The fresh events of one Nostr run (see fresh-events.ts), as a budget: signed before the load
 * that spends them (never timed), for the warm-up first, then for the window at a rate learnt
 * from the warm-up. It says why a run that spent it cannot be used.
 */
import type { RunConfig } from './config.js';
import { signFreshEvents } from './fresh-events.js';
import type { FreshEvents } from './fresh-events.js';
import type { LoadResult } from './http-load.js';
import { GRACE_MS } from '../ws-load.js';

/**
 * The window's fresh events are signed for this many times the warm-up's rate (at most
 * --fresh-events-per-sec, at least MIN_WINDOW_RATE): a window is not 3x faster than the
 * warm-up before it, and signing at the upper rate for long windows costs minutes.
 */
export const WINDOW_HEADROOM = 3;
export const MIN_WINDOW_RATE = 1000;

/** Events to sign for `seconds` of load at `perSec` (plus the grace period and one each). */
export function freshEventCount(perSec: number, seconds: number, connections: number): number {
  return Math.ceil(perSec * (seconds + GRACE_MS / 1000)) + connections;
}

/**
 * The keys a long-tail run (`nostr-long-tail`) may sign with: one for every event it could
 * ever sign (the warm-up's and the window's, both at --fresh-events-per-sec), so author `i`
 * signs event `i` alone. A run signs fewer (the window's rate is learnt from the warm-up);
 * the result's `events.authors` says how many signed.
 */
export function longTailAuthors(
  cfg: Pick<RunConfig, 'warmupSec' | 'durationSec' | 'connections'> & { maxPerSec: number },
): number {
  const warm =
    cfg.warmupSec > 0 ? freshEventCount(cfg.maxPerSec, cfg.warmupSec, cfg.connections) : 0;
  return warm + freshEventCount(cfg.maxPerSec, cfg.durationSec, cfg.connections);
}

export class FreshBudget {
  events: FreshEvents | undefined;
  signSeconds = 0;
  /** The rate the window's events were signed for. */
  windowRate: number | undefined;

  constructor(
    private readonly cfg: RunConfig & { freshEvents: NonNullable<RunConfig['freshEvents']> },
    private readonly phase: (what: string) => void,
  ) {}

  /** Before the first load: the warm-up's events, or the window's when there is no warm-up. */
  async prepare(): Promise<void> {
    const { cfg } = this;
    const { maxPerSec } = cfg.freshEvents;
    if (cfg.warmupSec > 0) {
      await this.sign(freshEventCount(maxPerSec, cfg.warmupSec, cfg.connections), 'warm-up');
      return;
    }
    await this.sign(freshEventCount(maxPerSec, cfg.durationSec, cfg.connections), 'window');
    this.windowRate = maxPerSec;
  }

  /**
   * After the warm-up: the window's events, for WINDOW_HEADROOM x the warm-up's rate (a
   * window that sends more fails: it never re-sends an id).
   */
  async afterWarmup(warm: LoadResult): Promise<void> {
    const { cfg } = this;
    const measured = warm.counts.requests / warm.wallSeconds;
    const rate = Math.min(
      cfg.freshEvents.maxPerSec,
      Math.max(MIN_WINDOW_RATE, Math.ceil(WINDOW_HEADROOM * measured)),
    );
    this.windowRate = rate;
    const left = this.events!.ids.length - this.events!.next;
    const need = freshEventCount(rate, cfg.durationSec, cfg.connections);
    if (need > left) await this.sign(need - left, 'window');
  }

  /** Why the run cannot be used: events ran out, or some were not new. */
  failures(exhausted: boolean, duplicates: number): string[] {
    return this.events
      ? freshFailures(this.cfg, this.events, exhausted, duplicates, this.windowRate)
      : [];
  }

  /** The result file's `events`. */
  summary(duplicates: number) {
    const { events } = this;
    return events
      ? {
          source: 'fresh' as const,
          signed: events.ids.length,
          signSeconds: this.signSeconds,
          sent: events.next,
          duplicates,
          windowRatePerSec: this.windowRate ?? null,
          // Keys that signed: events i = 0..signed-1 are signed by author i % authors.
          authors: Math.min(events.ids.length, this.cfg.freshEvents.authors),
        }
      : null;
  }

  private async sign(count: number, what: string): Promise<void> {
    const { cfg } = this;
    const t = performance.now();
    const more = await signFreshEvents({
      count,
      // Indexes (so authors) continue after what was signed for the warm-up.
      from: this.events?.ids.length ?? 0,
      authors: cfg.freshEvents.authors,
      seed: cfg.seed,
      label: `${cfg.implementation}:${cfg.mode} ${cfg.workload} ${cfg.relayImpl ?? 'reference'} ${cfg.connections}c ${cfg.durationSec}s run ${cfg.run} ${what}`,
    });
    const seconds = (performance.now() - t) / 1000;
    this.signSeconds += seconds;
    const { events } = this;
    this.events = events
      ? {
          ids: events.ids.concat(more.ids),
          events: events.events.concat(more.events),
          next: events.next,
        }
      : more;
    this.phase(
      `${count} fresh events for the ${what} signed by ${Math.min(count, cfg.freshEvents.authors)} keys in ${seconds.toFixed(1)} s`,
    );
  }
}

/** Why a fresh-event Nostr run cannot be used: events ran out, or some were not new. */
export function freshFailures(
  cfg: RunConfig,
  fresh: FreshEvents,
  exhausted: boolean,
  duplicates: number,
  windowRate?: number,
): string[] {
  const reasons: string[] = [];
  if (exhausted) {
    reasons.push(
      `ran out of pre-signed events: all ${fresh.ids.length} were sent before the window ended ` +
        `(signed for ${windowRate ?? cfg.freshEvents?.maxPerSec}/s: ${WINDOW_HEADROOM} x the ` +
        `warm-up's rate, at most --fresh-events-per-sec ${cfg.freshEvents?.maxPerSec})`,
    );
  }
  if (duplicates > 0) reasons.push(`${duplicates} OKs said duplicate: events were not new`);
  return reasons;
}
