/**
 * What this process last learnt of each key's quota: the points it had left and till when.
 * The Nostr path reads it to decide whether an author's event needs its signature checked
 * before the author is charged (near the limit) or only hashed (far from it, or unknown, one
 * write at a time): never whether to admit, which stays the counter's decision. Pure and
 * bounded.
 */
import { Lru } from '../util/lru.js';
import type { ClientKey } from '../store/index.js';

/** The share of a limit kept as margin: within it of the limit, events are judged exactly. */
export const HEADROOM_MARGIN_SHARE = 0.25;
/** How long a key found free (no limit applies) is taken as free. */
const FREE_MS = 60_000;

interface Known {
  remaining: number;
  limit: number;
  /** When the window the numbers belong to ends (epoch ms). */
  until: number;
}

/**
 * Points of writes judged on the hash and not charged yet, per key: concurrent writes read
 * the headroom before any of their charges updates it, so each reserves its cost when it is
 * judged (synchronously, before it awaits anything) and gives it up once its checks end.
 */
type Reserved = Map<ClientKey, number>;

/** The part of a quota decision the hint keeps (null: the key was free). */
export interface Learnt {
  outcome: string;
  remaining: number;
  limit: number;
  resetSec: number;
  receipt?: { until: number } | undefined;
}

/** Points kept as margin under a limit: at least one. */
export function headroomMargin(limit: number): number {
  return Math.max(1, Math.ceil(limit * HEADROOM_MARGIN_SHARE));
}

export class Headroom {
  private readonly known: Lru<ClientKey, Known>;
  private readonly reserved: Reserved = new Map();

  constructor(
    max: number,
    private readonly now: () => number = Date.now,
  ) {
    this.known = new Lru<ClientKey, Known>({ max });
  }

  /**
   * Remember what a charge of `key` showed. Only a counter's own numbers are kept (allowed or
   * limited): an insured or failed decision says nothing of what Valkey holds, and is forgotten.
   */
  learn(key: ClientKey, decision: Learnt | null): void {
    const now = this.now();
    if (decision === null) {
      this.known.set(key, { remaining: Infinity, limit: Infinity, until: now + FREE_MS });
      return;
    }
    if (decision.outcome !== 'allowed' && decision.outcome !== 'limited') {
      this.known.delete(key);
      return;
    }
    const until = decision.receipt?.until ?? now + decision.resetSec * 1000;
    this.known.set(key, { remaining: decision.remaining, limit: decision.limit, until });
  }

  /**
   * True when the key was last seen, in a window still running, with `cost` points and the
   * margin (headroomMargin) to spare; false when unknown, its window over, or near its limit.
   */
  roomFor(key: ClientKey, cost: number): boolean {
    const known = this.fresh(key);
    if (!known) return false;
    if (known.limit === Infinity) return true;
    const held = this.reserved.get(key) ?? 0;
    return known.remaining - held - cost >= headroomMargin(known.limit);
  }

  /**
   * Whether a write of `cost` may be judged on the hash now, and if so `cost` reserved at once
   * (call `release` when the write's checks end, whatever they decided). A key known in its
   * window: when `roomFor` it, so N concurrent writes of the key take at most its remaining
   * points less the margin, together. A key unknown here (never charged, or its window over):
   * one write at a time, whose charge teaches the rest; most authors of a public relay write a
   * few events an hour, so most are unknown on every gateway every time they write.
   */
  reserve(key: ClientKey, cost: number): boolean {
    if (!this.mayReserve(key, cost)) return false;
    this.reserved.set(key, (this.reserved.get(key) ?? 0) + cost);
    return true;
  }

  /** Whether `reserve` would reserve now (it changes nothing). */
  mayReserve(key: ClientKey, cost: number): boolean {
    return this.fresh(key) === undefined ? !this.reserved.has(key) : this.roomFor(key, cost);
  }

  /** Give up a reservation (its charge, if any, is counted by now: see `learn`). */
  release(key: ClientKey, cost: number): void {
    const left = (this.reserved.get(key) ?? 0) - cost;
    if (left > 0) this.reserved.set(key, left);
    else this.reserved.delete(key);
  }

  /**
   * The key's quota as last learnt, if it had less than `cost` left in a window still running:
   * a charge of `cost` waits for that window to end (as far as this process knows).
   */
  short(
    key: ClientKey,
    cost: number,
  ): { limit: number; remaining: number; until: number } | undefined {
    const known = this.fresh(key);
    return known && known.remaining < cost ? known : undefined;
  }

  /** What was learnt of the key, if its window still runs. */
  private fresh(key: ClientKey): Known | undefined {
    const known = this.known.get(key);
    return known && this.now() < known.until ? known : undefined;
  }

  /** Keys held now (reservations last only while writes are in their checks). */
  get size(): number {
    return this.known.size;
  }

  /** Keys with writes reserved now. */
  get reservedKeys(): number {
    return this.reserved.size;
  }
}
