/**
 * The plain limiter and the wrappers around it, each one Consumer (consume.ts) with one job.
 * A quota counter is `guarded(source, ...)`: insurance(breaker(block(source))), where the
 * source is the plain limiter, or the lease book around it.
 */
import type { InMemoryBlocks } from '../store/blocks.js';
import { StoreError } from '../store/index.js';
import type { ClientKey, Decision, QuotaLimiter } from '../store/index.js';
import { after } from '../util/maybe.js';
import type { Maybe } from '../util/maybe.js';
import type { WindowCounters } from '../util/window-counters.js';
import { refusedFromMemory } from './consume.js';
import type { Consumer, DecisionObserver, Failed, Receipt, Verdict } from './consume.js';
import type { LeaseBook, LeaseVerdict } from './leases.js';

function failed(err: unknown): Failed {
  if (!(err instanceof StoreError)) throw err;
  return { failed: true, error: err };
}

/**
 * The plain limiter on Valkey: one round trip per consume. The limiter is made on first use
 * (a decider on leases may never need it).
 */
export class LimiterConsumer implements Consumer {
  private limiter: QuotaLimiter | undefined;

  constructor(
    private readonly makeLimiter: () => QuotaLimiter,
    private readonly points: number,
  ) {}

  async consume(key: ClientKey, cost: number): Promise<Verdict> {
    let d: Decision;
    try {
      d = await (this.limiter ??= this.makeLimiter()).consume(key, cost);
    } catch (err) {
      return failed(err);
    }
    return {
      failed: false,
      admitted: d.allowed,
      limit: this.points,
      remaining: d.remaining,
      msBeforeNext: d.msBeforeNext,
      consumed: d.consumed,
      exhausted: d.consumed >= this.points,
      by: 'store',
      roundTrip: true,
      // rate-limiter-flexible counts a refused consume too.
      counted: 'store',
    };
  }

  async refund(key: ClientKey, cost: number): Promise<boolean> {
    try {
      await (this.limiter ??= this.makeLimiter()).reward(key, cost);
      return true;
    } catch (err) {
      failed(err);
      return false;
    }
  }
}

/** What a key's leases derive from: the counter, its limit now and the base before m. */
export interface LeaseTerms {
  /** The counter's key prefix: a lease's key is `<prefix>:<client key>`. */
  keyPrefix: string;
  /** The effective limit (base x the node's multiplier). */
  limit: number;
  windowMs: number;
  /** The base quota, so a change of the node's multiplier can clip the lease at once. */
  base: number;
}

/**
 * Writes through this gateway's leases: a point held here is spent from memory, and only
 * when none is held does a take go to Valkey. A consume of nothing (cost 0) asks the plain
 * limiter: there is nothing to lease.
 */
export class LeasedConsumer implements Consumer {
  constructor(
    private readonly inner: Consumer,
    private readonly book: LeaseBook,
    private readonly terms: LeaseTerms,
  ) {}

  consume(key: ClientKey, cost: number, nodeId: string): Maybe<Verdict> {
    if (!(cost > 0)) return this.inner.consume(key, cost, nodeId);
    const { keyPrefix, windowMs, base } = this.terms;
    const v = this.book.consume(`${keyPrefix}:${key}`, cost, this.terms.limit, windowMs, {
      nodeId,
      base,
    });
    // Points held here decide at once; only a take from Valkey can fail.
    return v instanceof Promise ? v.then((l) => this.verdict(l), failed) : this.verdict(v);
  }

  private verdict(v: LeaseVerdict): Verdict {
    const { limit } = this.terms;
    return {
      failed: false,
      admitted: v.allowed,
      limit,
      remaining: v.remaining,
      msBeforeNext: v.msBeforeNext,
      consumed: v.consumed,
      // Valkey's count includes points held here: only a refusal shows the key is out.
      exhausted: !v.allowed && v.consumed >= limit,
      by: 'store',
      roundTrip: v.tookLease,
      // A refused take spends nothing.
      counted: v.allowed ? 'store' : undefined,
    };
  }

  /**
   * Points spent from a lease still held go back into it; the rest (the lease handed back or
   * lapsed since) to the counter in Valkey, where the hand-back put what was spent.
   */
  async refund(key: ClientKey, cost: number, receipt: Receipt): Promise<boolean> {
    if (this.book.refund(`${this.terms.keyPrefix}:${key}`, cost)) return true;
    return this.inner.refund(key, cost, receipt);
  }
}

/**
 * A key known to be out of points is refused from memory until its window ends: a flood
 * past the limit costs no round trip per request. The blocks record counts, so one set
 * serves every limit of the counter (each multiplier compares its own points).
 */
export class BlockedConsumer implements Consumer {
  constructor(
    private readonly inner: Consumer,
    private readonly blocks: InMemoryBlocks,
    private readonly points: number,
  ) {}

  consume(key: ClientKey, cost: number, nodeId: string): Maybe<Verdict> {
    const ms = this.blocks.msBlocked(key, this.points);
    if (ms > 0) return refusedFromMemory(this.points, ms);
    return after(this.inner.consume(key, cost, nodeId), (v) => {
      if (!v.failed && v.exhausted) this.blocks.block(key, v.consumed, v.msBeforeNext);
      return v;
    });
  }

  /** A block counts what Valkey counted: a refund lowers it (and may lift it) as it lowers Valkey's. */
  refund(key: ClientKey, cost: number, receipt: Receipt): Promise<boolean> {
    this.blocks.lower(key, cost);
    return this.inner.refund(key, cost, receipt);
  }
}

/** What a consume gets while the breaker skips Valkey. */
const SKIPPED: Failed = {
  failed: true,
  error: new StoreError('skipped: Valkey failed less than quotas.retryStoreAfterMs ago'),
};

/**
 * After a store failure, Valkey is skipped for a moment (every request waiting out a timeout
 * would stall the gateway). One breaker for all of a decider's counters: a failure of one
 * means Valkey is down for all of them.
 */
export class StoreBreaker {
  private openUntil = 0;

  constructor(
    private readonly now: () => number,
    private readonly retryAfterMs: () => number,
    readonly observer: DecisionObserver = { storeCall: () => undefined },
  ) {}

  /** True while Valkey is being skipped after a failure. */
  get isOpen(): boolean {
    return this.now() < this.openUntil;
  }

  trip(): void {
    this.openUntil = this.now() + this.retryAfterMs();
  }

  wrap(inner: Consumer): Consumer {
    return new BreakerConsumer(inner, this);
  }
}

class BreakerConsumer implements Consumer {
  constructor(
    private readonly inner: Consumer,
    private readonly breaker: StoreBreaker,
  ) {}

  consume(key: ClientKey, cost: number, nodeId: string): Maybe<Verdict> {
    const breaker = this.breaker;
    if (breaker.isOpen) return SKIPPED;
    const started = performance.now();
    return after(this.inner.consume(key, cost, nodeId), (v) => {
      if (v.failed) {
        breaker.observer.storeCall((performance.now() - started) / 1000, false);
        breaker.trip();
      } else if (v.roundTrip) {
        breaker.observer.storeCall((performance.now() - started) / 1000, true);
      }
      return v;
    });
  }

  /** Skipped while the breaker is open: a refund is not worth waiting out a timeout for. */
  refund(key: ClientKey, cost: number, receipt: Receipt): Promise<boolean> {
    if (this.breaker.isOpen) return Promise.resolve(false);
    return this.inner.refund(key, cost, receipt);
  }
}

/** This gateway's share of a counter, kept in memory while Valkey is down. */
export interface Insurance {
  /**
   * One counter per key whatever the multiplier, kept across reloads by the owner; made on
   * first use (it allocates for its bound, and most gateways never see Valkey fail).
   */
  counters: () => WindowCounters<ClientKey>;
  /** Points per window this gateway may admit alone (quota / gateways). */
  share: number;
  windowMs: number;
}

/**
 * While Valkey fails, the insured share judges: the counters hold what this gateway admitted
 * (and refused, as Valkey counts it) and compare the share in force, so a multiplier change
 * neither resets nor splits what was consumed.
 */
export class InsuredConsumer implements Consumer {
  constructor(
    private readonly inner: Consumer,
    private readonly insurance: Insurance,
  ) {}

  consume(key: ClientKey, cost: number, nodeId: string): Maybe<Verdict> {
    return after(this.inner.consume(key, cost, nodeId), (v) =>
      v.failed ? this.insured(key, cost) : v,
    );
  }

  private insured(key: ClientKey, cost: number): Verdict {
    const { counters, share, windowMs } = this.insurance;
    const res = counters().consume(key, cost, windowMs);
    return {
      failed: false,
      admitted: res.consumed <= share,
      limit: share,
      remaining: Math.max(0, share - res.consumed),
      msBeforeNext: res.msBeforeNext,
      consumed: res.consumed,
      exhausted: res.consumed >= share,
      by: 'insurance',
      roundTrip: false,
      counted: 'insurance',
    };
  }

  /** An insured charge is refunded to the insured share: Valkey never counted it. */
  refund(key: ClientKey, cost: number, receipt: Receipt): Promise<boolean> {
    if (receipt.into === 'store') return this.inner.refund(key, cost, receipt);
    this.insurance.counters().refund(key, cost);
    return Promise.resolve(true);
  }
}

/** The guards around a counter's source, outermost last. */
export interface Guards {
  /** The counter's in-memory block (quotas.inMemoryBlock, and a limit above 0). */
  blocks?: InMemoryBlocks | undefined;
  breaker: StoreBreaker;
  /** The insured share (quotas.onStoreFailure: insure). */
  insurance?: Insurance | undefined;
}

/**
 * insurance(breaker(block(source))): the block answers before Valkey is asked; the breaker
 * times Valkey's calls and, while open, skips all it wraps (the block too: the insured share
 * then judges every request); the insurance judges what the breaker got no verdict for.
 * Without insurance a failure stays one, for quotas.onStoreFailure (open or closed).
 */
export function guarded(source: Consumer, points: number, guards: Guards): Consumer {
  let consumer = source;
  if (guards.blocks) consumer = new BlockedConsumer(consumer, guards.blocks, points);
  consumer = guards.breaker.wrap(consumer);
  if (guards.insurance) consumer = new InsuredConsumer(consumer, guards.insurance);
  return consumer;
}
