/**
 * What this process last learnt of each key's quota: the points it had left and till when.
 * The Nostr path reads it to decide whether an author's event needs its signature checked
 * before the author is charged (near the limit, or unknown) or only hashed (far from it):
 * never whether to admit, which stays the counter's decision. Pure and bounded.
 */
import { LRUCache } from 'lru-cache';
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
  private readonly known: LRUCache<ClientKey, Known>;

  constructor(
    max: number,
    private readonly now: () => number = Date.now,
  ) {
    this.known = new LRUCache<ClientKey, Known>({ max });
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
    const known = this.known.get(key);
    if (!known || this.now() >= known.until) return false;
    if (known.limit === Infinity) return true;
    return known.remaining - cost >= headroomMargin(known.limit);
  }

  /** Keys held now. */
  get size(): number {
    return this.known.size;
  }
}
