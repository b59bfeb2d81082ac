import { randomBytes } from 'node:crypto';
import type { PresenceStore } from '../store/index.js';
import type { Presence } from './credit.js';

/** How often a gateway process says it is there. */
export const PRESENCE_BEAT_MS = 500;
/**
 * A confirmation of being alone holds this long from the moment its heartbeat was sent: one
 * lost beat does not end it; a gateway joining is seen within it.
 */
export const PRESENCE_VALID_MS = 2 * PRESENCE_BEAT_MS;

export interface FleetPresenceOptions {
  /**
   * The presence set of the quotas in force (`<quotas.keyPrefix>:presence`), read at each
   * beat, so a reload that moves the quotas moves the beat with them; undefined while quotas
   * are off (no beat: such a process takes nothing, and is not alone).
   */
  key: () => string | undefined;
  /** The longest quota window now configured, in ms (read at each beat: reloads change it). */
  longestWindowMs: () => number;
  onError?: (err: unknown) => void;
  /** A monotonic clock in ms. */
  now?: () => number;
}

/**
 * This process's heartbeat in the presence set of its quotas, and what the last one saw.
 * Every gateway process with quotas on beats, whether or not it grants credit itself, so that
 * one that does sees it; one whose quotas a reload turns on beats from then on. An id counts
 * for a window (and the beats' slack) after its last beat: a gateway restarted, or a second
 * one started, ends credit until every key another process could have taken for has expired.
 */
export class FleetPresence implements Presence {
  readonly id = randomBytes(8).toString('hex');
  private aloneUntil = -Infinity;
  private timer: NodeJS.Timeout | undefined;
  private beating = false;
  private stopped = false;
  private retainMs = 0;
  private readonly now: () => number;

  constructor(
    private readonly store: PresenceStore,
    private readonly opts: FleetPresenceOptions,
  ) {
    this.now = opts.now ?? (() => performance.now());
  }

  /** The first beat (awaited, never throws), then one every PRESENCE_BEAT_MS. */
  async start(): Promise<void> {
    await this.beat();
    this.timer = setInterval(() => void this.beat(), PRESENCE_BEAT_MS);
    this.timer.unref();
  }

  stop(): void {
    this.stopped = true;
    clearInterval(this.timer);
    this.aloneUntil = -Infinity;
  }

  alone(): boolean {
    return this.now() < this.aloneUntil;
  }

  /** One heartbeat; a failure or another process seen ends the confirmation at once. */
  async beat(): Promise<void> {
    if (this.beating) return;
    const key = this.opts.key();
    if (key === undefined) {
      this.aloneUntil = -Infinity;
      return;
    }
    this.beating = true;
    const sentAt = this.now();
    try {
      // Never shorter than before: keys taken under a longer window (before a reload) live on.
      const retainMs = Math.ceil(this.opts.longestWindowMs() + 2 * PRESENCE_VALID_MS);
      this.retainMs = Math.max(this.retainMs, retainMs);
      const others = await this.store.beat(key, this.id, this.retainMs);
      this.aloneUntil = others === 0 && !this.stopped ? sentAt + PRESENCE_VALID_MS : -Infinity;
    } catch (err) {
      this.aloneUntil = -Infinity;
      this.opts.onError?.(err);
    } finally {
      this.beating = false;
    }
  }
}
