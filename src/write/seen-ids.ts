/**
 * Event ids a relay accepted, for as long as their author's window (a replay within it meets
 * the claim): in this process's memory, and shared through Valkey for ids the gateway verified.
 */
import { Lru } from '../util/lru.js';
import type { Event } from 'nostr-tools/pure';
import type { KeyValue } from '../store/index.js';
import { StoreError } from '../store/index.js';

/**
 * How far ahead of the gateway's clock a lifted event may be dated, and how much longer than
 * its author's window a claim on an event dated ahead is kept: a lifted replay (dated within
 * the window) always meets the claim of its first acceptance.
 */
export const LIFT_AHEAD_SEC = 60;

/**
 * How long a claim on an accepted event lasts: its author's window, and as much longer as the
 * event is dated ahead (at most LIFT_AHEAD_SEC), so that it covers every replay dated within
 * the window of now.
 */
export function claimMs(windowSec: number, createdAt: number, nowSec: number): number {
  const ahead = Math.min(Math.max(createdAt - nowSec, 0), LIFT_AHEAD_SEC);
  return (windowSec + ahead) * 1000;
}

export interface SeenStore {
  kv: () => KeyValue;
  /** Whether the store is known down now (no round trip is tried). */
  down: () => boolean;
  keyPrefix: () => string;
}

/** What makes two writes copies of one event: its id and its signature. */
type Copy = Pick<Event, 'id' | 'sig'>;

function copyOf(event: Copy): string {
  return `${event.id}:${event.sig}`;
}

/** How long an id forwarded is taken as awaited at most, should its ticket never settle. */
const AWAITED_MAX_MS = 30_000;

export class SeenIds {
  private readonly accepted: Lru<string, true>;
  /**
   * Events (id and signature) in their checks or forwarded through this process, the relay's
   * answer awaited, with how many writes await each: a copy sent meanwhile (a replay from another connection) is answered without
   * charging its author again, so replays sent at once hold at most one charge a process.
   */
  private readonly awaited: Lru<string, number>;

  constructor(
    max: number,
    private readonly store: SeenStore,
  ) {
    this.accepted = new Lru<string, true>({ max, ttlAutopurge: false });
    this.awaited = new Lru<string, number>({ max, ttl: AWAITED_MAX_MS, ttlAutopurge: false });
  }

  /** A write of this event is in its checks or forwarded: awaited until `settled`. */
  begin(event: Copy): void {
    const copy = copyOf(event);
    this.awaited.set(copy, (this.awaited.get(copy) ?? 0) + 1);
  }

  /** The relay's answer for one write of this event is in (or lost). */
  settled(event: Copy): void {
    const copy = copyOf(event);
    const left = (this.awaited.get(copy) ?? 0) - 1;
    if (left > 0) this.awaited.set(copy, left);
    else this.awaited.delete(copy);
  }

  /** Seen stored through this process (memory only, no round trip). */
  here(id: string): boolean {
    return this.accepted.has(id);
  }

  /** This very event (id and signature) is in its checks or forwarded through this process. */
  inFlight(event: Copy): boolean {
    return this.awaited.has(copyOf(event));
  }

  /**
   * Whether some gateway marked this id seen: without the store it is judged new ('unknown';
   * the insurance limiter still bounds its author).
   */
  async anywhere(id: string): Promise<boolean | 'unknown'> {
    if (this.accepted.has(id)) return true;
    if (this.store.down()) return 'unknown';
    try {
      return (await this.store.kv().get(this.key(id))) !== null;
    } catch (err) {
      if (err instanceof StoreError) return 'unknown';
      throw err;
    }
  }

  /** Mark `id` seen for `ms`: here, and in Valkey too when `shared`. */
  async claim(id: string, ms: number, shared: boolean): Promise<void> {
    this.accepted.set(id, true, { ttl: ms });
    if (!shared || this.store.down()) return;
    try {
      await this.store.kv().claim(this.key(id), '1', ms);
    } catch (err) {
      // Without the mark, a replay is judged as new (and its author charged again).
      if (!(err instanceof StoreError)) throw err;
    }
  }

  get size(): number {
    return this.accepted.size;
  }

  /** Event ids are hashes of verified content: their own hash tag spreads them over slots. */
  private key(id: string): string {
    return `${this.store.keyPrefix()}:seen:{${id}}`;
  }
}
