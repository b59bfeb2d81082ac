/**
 * Credit for a key's first write of a window, on a gateway that is the only one taking for
 * its quotas: the point is spent at once and its take goes to Valkey behind it, so a public
 * relay's long tail (every author new in its window) does not wait a round trip an event.
 *
 * Exact while its two conditions hold, which the gate checks and does not assume:
 * - this process is the only holder (quotas.gateways x workers = 1) and the fleet's presence
 *   set in Valkey has seen no other gateway within the longest window (fleet-presence.ts), so
 *   every key alive in Valkey was taken by this process;
 * - this process took nothing for the key within its window (TakenFilter below), so the key
 *   has expired in Valkey and its count is 0: a first point within the limit is a point
 *   Valkey would have granted.
 */

/** Bits per generation: 4 Mi (512 KiB); a false "maybe taken" costs only a round trip. */
const FILTER_BITS = 1 << 22;

/**
 * The keys this process took for in the last window at least: two generations of one bit a
 * key, the older dropped when the newer has lived the longest window noted. A key noted at
 * `t` is still answered "maybe" at any time before `t + window` (it is in the current or the
 * previous generation until two rotations have passed, each at least one window apart).
 * Nothing is ever evicted early, whatever a flood of keys does: a full filter answers
 * "maybe" to everything, which grants no credit (it fails safe).
 */
export class TakenFilter {
  private current = new Uint32Array(FILTER_BITS / 32);
  private previous = new Uint32Array(FILTER_BITS / 32);
  private rotatedAt: number;
  /** The longest window noted: generations rotate no more often than this. */
  private periodMs = 0;

  constructor(private readonly now: () => number) {
    this.rotatedAt = now();
  }

  /** The key was (or is about to be) taken for, under a window of `windowMs`. */
  note(key: string, windowMs: number): void {
    this.rotate();
    if (windowMs > this.periodMs) this.periodMs = windowMs;
    const bit = bitOf(key);
    this.current[bit >>> 5]! |= 1 << (bit & 31);
  }

  /**
   * False only if the key was noted under no window of `windowMs` or longer that can still be
   * running: a key whose window is longer than any noted so far is answered true.
   */
  mayHave(key: string, windowMs: number): boolean {
    this.rotate();
    if (windowMs > this.periodMs) return true;
    const bit = bitOf(key);
    const word = bit >>> 5;
    const mask = 1 << (bit & 31);
    return ((this.current[word]! | this.previous[word]!) & mask) !== 0;
  }

  private rotate(): void {
    const now = this.now();
    // Nothing noted yet: the first generation starts with the first key, not before it.
    if (this.periodMs === 0) this.rotatedAt = now;
    if (this.periodMs === 0 || now - this.rotatedAt < this.periodMs) return;
    // Two periods or more without a rotation: both generations are older than a window.
    if (now - this.rotatedAt >= 2 * this.periodMs) this.current.fill(0);
    const old = this.previous;
    this.previous = this.current;
    old.fill(0);
    this.current = old;
    this.rotatedAt = now;
  }
}

/** FNV-1a over the key's UTF-16 units: keys end in an HMAC, so any fair hash spreads them. */
function bitOf(key: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) {
    h ^= key.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0) & (FILTER_BITS - 1);
}

/** Whether this process is the only gateway taking for its quotas, as last confirmed. */
export interface Presence {
  /** True while a confirmation that no other gateway took in the longest window is fresh. */
  alone(): boolean;
}

/** The decision to admit a key's point on credit, and the record of every key taken for. */
export interface CreditGate {
  /** True when `cost` points of `key` may be admitted now and taken from Valkey after. */
  may(key: string, cost: number, limit: number, windowMs: number): boolean;
  /** Every take of this process, credited or not, at the moment it is sent. */
  note(key: string, windowMs: number): void;
  /**
   * Credit on or off (the settings: leases, quotas.lease.credit, one holder). Turned on again
   * after being off, it waits `longestWindowMs`: takes made meanwhile outside the lease book
   * (leases off) were not noted.
   */
  enable(on: boolean, longestWindowMs: number): void;
}

/** The gate of one process, watched by its presence; one for the process's whole life. */
export function creditGate(presence: Presence, now: () => number): CreditGate {
  const taken = new TakenFilter(now);
  let on = false;
  let configured = false;
  let notBefore = 0;
  return {
    may(key, cost, limit, windowMs) {
      return (
        on &&
        cost <= limit &&
        now() >= notBefore &&
        presence.alone() &&
        !taken.mayHave(key, windowMs)
      );
    },
    note(key, windowMs) {
      taken.note(key, windowMs);
    },
    enable(next, longestWindowMs) {
      if (next && !on && configured) notBefore = now() + longestWindowMs;
      on = next;
      configured = true;
    },
  };
}

/**
 * The longest `windowSec` anywhere in a configuration section, in ms (0 if none): every
 * quota a gateway takes for has its window there, whatever section holds it.
 */
export function longestWindowMs(section: unknown): number {
  let longest = 0;
  const walk = (v: unknown): void => {
    if (Array.isArray(v)) v.forEach(walk);
    else if (v !== null && typeof v === 'object') {
      for (const [k, x] of Object.entries(v)) {
        if (k === 'windowSec' && typeof x === 'number' && x > longest) longest = x;
        else walk(x);
      }
    }
  };
  walk(section);
  return longest * 1000;
}
