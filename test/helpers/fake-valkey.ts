/**
 * Valkey's quota counters in process, for unit tests of the decider: fixed windows in a Map,
 * one per (prefix, key) and shared by every limiter of a prefix (as the real counters are),
 * behind the real QuotaLimiter, with the lease scripts' rules on the same counters; and a
 * clock the test moves by hand.
 */
import { RateLimiterRes } from 'rate-limiter-flexible';
import type { RateLimiterStoreAbstract } from 'rate-limiter-flexible';
import { StoreError } from '../../src/store/index.js';
import type { ClientKey, LeaseStore, LimiterOptions, Store } from '../../src/store/index.js';
import type { TakeBounds } from '../../src/store/lease.js';
import { QuotaLimiter } from '../../src/store/limiter.js';

/** A clock the test moves by hand. */
export function manualClock(start = 1_000_000) {
  let t = start;
  return { now: () => t, advance: (ms: number) => (t += ms) };
}

/** Valkey's counters in a Map: one per (prefix, key), shared by the limiters of a prefix. */
export class FakeValkey {
  readonly counters = new Map<string, { consumed: number; endsAt: number }>();
  /** Consumes that reached the store (not answered from memory). */
  calls = 0;
  /** Lease takes that reached the store. */
  takes = 0;
  /** Every call fails (as a store that is down) while set. */
  failing = false;

  constructor(private readonly now: () => number) {}

  /** What a counter holds now (0 when it has none or its window ended). */
  consumed(id: string): number {
    const c = this.counters.get(id);
    return c && c.endsAt > this.now() ? c.consumed : 0;
  }

  /** The lease scripts (src/store/lease.ts) on the limiters' counters: `<prefix>:<key>`. */
  readonly leases: LeaseStore = {
    take: (key: string, want: number, limit: number, windowMs: number, bounds: TakeBounds = {}) => {
      this.takes++;
      if (this.failing) return Promise.reject(new StoreError('lease take failed: valkey is down'));
      const now = this.now();
      const need = bounds.need ?? Math.min(1, want);
      const live = this.counters.get(key);
      const c = live && live.endsAt > now ? live : { consumed: 0, endsAt: now + windowMs };
      const left = limit - c.consumed;
      if (want <= 0 || left <= 0 || left < need) {
        const msLeft = live === c ? c.endsAt - now : 0;
        return Promise.resolve({ granted: 0, consumed: c.consumed, msLeft });
      }
      const share = Math.floor(left / (bounds.divisor ?? 1));
      const granted = Math.min(want, left, Math.max(need, share));
      c.consumed += granted;
      this.counters.set(key, c);
      return Promise.resolve({ granted, consumed: c.consumed, msLeft: c.endsAt - now });
    },
    giveBack: (key: string, points: number) => {
      if (this.failing) return Promise.reject(new StoreError('lease give back failed'));
      const c = this.counters.get(key);
      if (!c || c.endsAt <= this.now()) return Promise.resolve(0);
      const n = Math.min(points, c.consumed);
      c.consumed -= n;
      return Promise.resolve(n);
    },
  };

  readonly store = {
    leases: this.leases,
    limiter: (opts: LimiterOptions) => {
      const current = (k: ClientKey) => {
        const c = this.counters.get(`${opts.keyPrefix}:${k}`);
        return c && c.endsAt > this.now() ? c : undefined;
      };
      const inner = {
        consume: (k: ClientKey, points: number) => {
          this.calls++;
          if (this.failing) return Promise.reject(new Error('valkey is down'));
          const now = this.now();
          let c = current(k);
          if (!c) {
            c = { consumed: 0, endsAt: now + opts.duration * 1000 };
            this.counters.set(`${opts.keyPrefix}:${k}`, c);
          }
          c.consumed += points;
          const res = new RateLimiterRes(
            Math.max(0, opts.points - c.consumed),
            c.endsAt - now,
            c.consumed,
          );
          // As rate-limiter-flexible does: a refusal rejects with the result, not an Error.
          // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors
          return c.consumed > opts.points ? Promise.reject(res) : Promise.resolve(res);
        },
        // As rate-limiter-flexible does: a consume of -points (a window starts if none runs).
        reward: (k: ClientKey, points: number) => {
          this.calls++;
          if (this.failing) return Promise.reject(new Error('valkey is down'));
          let c = current(k);
          if (!c) {
            c = { consumed: 0, endsAt: this.now() + opts.duration * 1000 };
            this.counters.set(`${opts.keyPrefix}:${k}`, c);
          }
          c.consumed -= points;
          return Promise.resolve(new RateLimiterRes(0, c.endsAt - this.now(), c.consumed));
        },
        get: (k: ClientKey) => {
          if (this.failing) return Promise.reject(new Error('valkey is down'));
          const c = current(k);
          return Promise.resolve(
            c
              ? new RateLimiterRes(
                  Math.max(0, opts.points - c.consumed),
                  c.endsAt - this.now(),
                  c.consumed,
                )
              : null,
          );
        },
      } as unknown as RateLimiterStoreAbstract;
      return new QuotaLimiter(inner, opts.points);
    },
  } as unknown as Store;
}
