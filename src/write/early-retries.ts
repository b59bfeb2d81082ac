/**
 * Writes refused with a retry time, and the same writes sent again before it (a bouncer: one
 * address resending a refused event at once, 27 times a second in Yonle/bostr #12). Keyed by
 * the source address and the event id the gateway parsed, so a burst of different events an
 * honest client had sent before its first refusal arrived is judged as ever; only the same
 * event again, before its time, is early. Memory only, bounded (an LRU of refused writes).
 */
import { Lru } from '../util/lru.js';
import type { QuotaDecision } from '../quota/decider.js';
import { WindowCounters } from '../util/window-counters.js';

/**
 * A retry this much before its time is on time: the client's timer started when the answer
 * arrived, after the gateway sent it, and clocks and timers are coarse.
 */
export const EARLY_GRACE_MS = 250;

interface Due {
  /** When the refusal said the write could be sent again (ms). */
  atMs: number;
  /** The refusal's decision, for the RateLimit headers of an early retry over HTTP. */
  decision: QuotaDecision;
  /** Early copies of this write so far. */
  copies: number;
}

export interface EarlyRetry {
  /** Milliseconds until the write's retry time. */
  waitMs: number;
  /** Early retries from this address in the running window, this one included. */
  count: number;
  /**
   * This write was sent early before: a bouncer. A first early copy is what an honest client
   * resending its pending events on reconnect sends (each once), and is not held.
   */
  repeated: boolean;
  decision: QuotaDecision;
}

export class EarlyRetries {
  private readonly due: Lru<string, Due>;
  private readonly perAddress: WindowCounters;

  constructor(
    max: number,
    private readonly now: () => number,
  ) {
    this.due = new Lru<string, Due>({ max });
    this.perAddress = new WindowCounters(max, now);
  }

  /** `ip` was told to send the write `id` again in `retrySec` (a later time is kept). */
  refused(ip: string, id: string, retrySec: number, decision: QuotaDecision): void {
    const key = `${ip} ${id}`;
    const atMs = this.now() + retrySec * 1000;
    const held = this.due.get(key);
    if (!held || held.atMs < atMs) this.due.set(key, { atMs, decision, copies: held?.copies ?? 0 });
  }

  /**
   * The write `id` from `ip`, if it comes before its retry time: how long is left, and how many
   * such writes this address sent in the window (of `windowMs`). Undefined when it is on time.
   */
  early(ip: string, id: string, windowMs: number): EarlyRetry | undefined {
    const key = `${ip} ${id}`;
    const held = this.due.get(key);
    if (!held) return undefined;
    const waitMs = held.atMs - this.now();
    if (waitMs <= EARLY_GRACE_MS) {
      this.due.delete(key);
      return undefined;
    }
    const count = this.perAddress.consume(ip, 1, windowMs).consumed;
    held.copies++;
    return { waitMs, count, repeated: held.copies > 1, decision: held.decision };
  }

  /** Refused writes held now. */
  get size(): number {
    return this.due.size;
  }
}
