import { Lru } from '../util/lru.js';
import type { Lease, LeaseStore } from '../store/index.js';
import type { Maybe } from '../util/maybe.js';
import type { CreditGate } from './credit.js';
import { idleAfter, leaseDivisor, leaseForRate, nextLeaseSize } from './limits.js';

/**
 * What happened to leased points: taken from Valkey, spent here, refunded to the lease (the
 * write was not done), handed back, or let lapse; spent on credit before their take, and of
 * those, admitted without Valkey's grant (the take failed, or another process had taken).
 */
export type LeaseEvent =
  'leased' | 'spent' | 'refunded' | 'returned' | 'expired' | 'credited' | 'overcredited';

/** One verdict from the lease book. */
export interface LeaseVerdict {
  allowed: boolean;
  /**
   * What the client may still write as this gateway knows it: the points Valkey had left at
   * the last take (so not those leased to other gateways) plus those held here.
   */
  remaining: number;
  msBeforeNext: number;
  /** The counter in Valkey at the last take: every point consumed or leased, anywhere. */
  consumed: number;
  /** This verdict waited for a take from Valkey (a round trip). */
  tookLease: boolean;
}

/** One key's lease on this gateway, for the admin view. */
export interface LeaseSnapshot {
  /** Points leased to this gateway in the current window. */
  leased: number;
  /** Of those, points spent on admitted writes. */
  spent: number;
  /** Leased and not yet spent. */
  held: number;
  /** The size of the next lease this gateway will ask for. */
  nextLease: number;
  /** Milliseconds the lease's window has left, as this gateway reckons it. */
  msLeft: number;
}

/** What a key's limit derives from, so a change of the node's multiplier can clip it at once. */
export interface LeaseScope {
  /** The relay node the last write went to. */
  nodeId: string;
  /** The base quota (before the multiplier). */
  base: number;
}

interface Entry {
  scope: LeaseScope;
  /** Points leased to this gateway in the window, and of those spent: the rest is held. */
  leased: number;
  spent: number;
  /** When the window ends, counted from the send time of a take: never after Valkey's end. */
  endsAt: number;
  /** The effective limit the points were leased under: a lower one clips them. */
  limit: number;
  /** The counter after the last take, less the points handed back since. */
  consumed: number;
  size: number;
  lastUsed: number;
  /** Unused this long, what it holds goes back (idleAfter: at least the book's idleMs). */
  idleMs: number;
  /** The window of the last take: unused this long, an entry holding nothing is forgotten. */
  windowMs: number;
  /** When the last take was sent, and what it granted: the key's rate of spending. */
  lastTakeAt: number;
  lastGranted: number;
  /** Round trip of the last take: the slack a hand-back allows for the clocks' offset. */
  rttMs: number;
  /**
   * A take under way, or the hand-back of a clipped lease: writes of the key wait for it, so
   * that no take is judged before the points it must not count are back in Valkey.
   */
  pending?: Promise<unknown>;
}

export interface LeaseBookOptions {
  /** Gateway processes sharing the quota (gateways x workers): the share rule divides by it. */
  holders: number;
  /** A key unused this long hands its points back. */
  idleMs: number;
  /** Keys held at most; the least recently used hands its points back past it. */
  maxKeys: number;
  now?: () => number;
  /** Points by what happened to them (metrics). */
  onPoints?: (event: LeaseEvent, points: number) => void;
  /** A hand-back that failed: the points lapse with their window (logged, never thrown). */
  onReturnFailed?: (err: unknown) => void;
  /** Present when this process may admit a key's first point before its take (credit.ts). */
  credit?: CreditGate;
  /** A credited take failed: its write was admitted and Valkey never counted it. */
  onCreditLost?: (key: string, cost: number, windowMs: number) => void;
}

/** Waiters for another request's take retry this often before taking for themselves. */
const MAX_WAITS = 3;
/**
 * Credited takes wait this long for others to go with them: it delays no write (the credit
 * is spent at once), only the key's next write while it comes this soon.
 */
const CREDIT_BATCH_MS = 5;
/** Least slack a hand-back allows between the windows as each side reckons them. */
const MIN_SLACK_MS = 50;

/**
 * Quota leases on this gateway: a write for a key spends a point leased from Valkey, and
 * only when none is held does it take a lease (one atomic round trip that never grants past
 * the effective limit). Nothing is admitted that Valkey did not grant, or (credit, when this
 * process is the quotas' only taker) that Valkey would not have: so nothing is
 * over-admitted; the price is points leased here and never spent, bounded by the lease size
 * (see underAdmissionBound) and handed back when a key goes idle, is evicted, or the gateway
 * stops.
 */
export class LeaseBook {
  private readonly entries: Lru<string, Entry>;
  private readonly now: () => number;
  private readonly divisor: number;
  private readonly onPoints: (event: LeaseEvent, points: number) => void;
  private readonly sweeper: NodeJS.Timeout;
  private readonly returning = new Set<Promise<unknown>>();
  /**
   * Hand-backs under way per key, for keys no longer held (idle, evicted): the key's next
   * write waits for its own points to be back before it takes, or the take would count them
   * as still leased, be refused and block a client with points left. In flight only.
   */
  private readonly returningFor = new Map<string, Promise<void>>();
  /** Credited takes waiting to be sent, and the timer that sends them. */
  private credits: { send: () => Promise<void>; landed: () => void }[] = [];
  private creditTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly store: LeaseStore,
    private readonly opts: LeaseBookOptions,
  ) {
    this.now = opts.now ?? Date.now;
    this.divisor = leaseDivisor(opts.holders);
    this.onPoints = opts.onPoints ?? (() => undefined);
    this.entries = new Lru<string, Entry>({
      max: opts.maxKeys,
      dispose: (entry, key, reason) => {
        if (reason === 'evict') void this.handBack(key, entry);
      },
    });
    this.sweeper = setInterval(() => this.sweep(), Math.max(10, opts.idleMs / 2));
    this.sweeper.unref();
  }

  /**
   * Spend `cost` points of `key`'s quota, whose effective limit is `limit` per `windowMs`: at
   * once from points held here, else (a take from Valkey, or another's take to wait for) later.
   */
  consume(
    key: string,
    cost: number,
    limit: number,
    windowMs: number,
    scope: LeaseScope,
  ): Maybe<LeaseVerdict> {
    const entry = this.entryFor(key, limit, scope);
    if (held(entry) >= cost) return this.spend(entry, cost, limit, false);
    if (!entry.pending && this.opts.credit?.may(key, cost, limit, windowMs)) {
      return this.credit(key, entry, cost, limit, windowMs);
    }
    return this.consumeLater(entry, key, cost, limit, windowMs, scope);
  }

  private async consumeLater(
    first: Entry,
    key: string,
    cost: number,
    limit: number,
    windowMs: number,
    scope: LeaseScope,
  ): Promise<LeaseVerdict> {
    let entry = first;
    for (let waits = 0; ; waits++) {
      if (held(entry) >= cost) return this.spend(entry, cost, limit, false);
      if (entry.pending && waits < MAX_WAITS) {
        // Another request is taking for this key: its lease may cover this one too.
        await entry.pending.catch(() => undefined);
        entry = this.entryFor(key, limit, scope);
        continue;
      }
      return this.take(key, entry, cost, limit, windowMs);
    }
  }

  /**
   * Give `cost` points spent from the key's lease back to it (a refund): true when it holds
   * a lease of the running window that spent them; false otherwise, and the caller gives
   * them back to Valkey's counter, where a hand-back or the window left them.
   */
  refund(key: string, cost: number): boolean {
    const entry = this.entries.peek(key);
    if (!entry || entry.spent < cost || this.now() >= entry.endsAt) return false;
    entry.spent -= cost;
    this.onPoints('refunded', cost);
    return true;
  }

  /**
   * Milliseconds until more points may be had when this gateway knows the key is out of
   * them at `limit`: its last take left Valkey's counter at the limit and it holds none of
   * them (a refund or a higher limit ends that); else 0. Nothing is taken or asked.
   */
  msOut(key: string, limit: number): number {
    const entry = this.entries.peek(key);
    if (!entry || held(entry) > 0 || entry.consumed < limit) return 0;
    return Math.max(0, entry.endsAt - this.now());
  }

  /**
   * Resolves once what is under way for the key (a credited take on its way to Valkey, a
   * take, a hand-back) has landed: a read of Valkey's count after it sees every write this
   * gateway admitted for the key. Never rejects.
   */
  async settled(key: string): Promise<void> {
    await this.entries.peek(key)?.pending?.catch(() => undefined);
  }

  /** This gateway's lease on a key, or null when it holds none. */
  snapshot(key: string): LeaseSnapshot | null {
    const entry = this.entries.peek(key);
    if (!entry) return null;
    const msLeft = Math.max(0, entry.endsAt - this.now());
    const live = msLeft > 0;
    return {
      leased: live ? entry.leased : 0,
      spent: live ? entry.spent : 0,
      // A credit whose take has not landed holds fewer than none for a moment: shown as none.
      held: live ? Math.max(0, held(entry)) : 0,
      nextLease: entry.size,
      msLeft,
    };
  }

  /** Keys held now. */
  get size(): number {
    return this.entries.size;
  }

  /** Hand back every unspent point, and stop the idle sweep (at shutdown). */
  async close(): Promise<void> {
    clearInterval(this.sweeper);
    this.flushCredits();
    await Promise.allSettled([...this.returning]);
    for (const [key, entry] of this.entries.entries()) void this.handBack(key, entry);
    this.entries.clear();
    await Promise.allSettled([...this.returning]);
  }

  /**
   * Keys holding points and unused for their idle time hand them back. The key is kept, with
   * its rate cut to what it spent of its last lease, so that its next lease fits how it
   * writes instead of starting from 1 (and churning) again. A key holding none is forgotten
   * after a window unused: until then a client writing a few times a minute is leased by its
   * rate, not afresh at each write (the LRU bounds how many are kept).
   */
  sweep(): void {
    const now = this.now();
    for (const [key, entry] of this.entries.entries()) {
      if (entry.pending) continue;
      const unused = now - entry.lastUsed;
      if (held(entry) > 0 && now < entry.endsAt) {
        if (unused < entry.idleMs) continue;
        entry.lastGranted = Math.max(0, entry.lastGranted - held(entry));
        this.waitFor(entry, this.handBack(key, entry));
        continue;
      }
      if (unused < Math.max(entry.idleMs, entry.windowMs)) continue;
      this.entries.delete(key);
      void this.handBack(key, entry);
    }
  }

  /** The key's writes wait for a hand-back, so that no take counts the points going back. */
  private waitFor(entry: Entry, back: Promise<void>): void {
    const pending = back.finally(() => {
      if (entry.pending === pending) entry.pending = undefined;
    });
    entry.pending = pending;
  }

  /** The key's entry, its window lapsed or its lease clipped to a lower limit as needed. */
  private entryFor(key: string, limit: number, scope: LeaseScope): Entry {
    const now = this.now();
    let entry = this.entries.get(key);
    if (!entry) {
      entry = {
        scope,
        leased: 0,
        spent: 0,
        endsAt: 0,
        limit,
        consumed: 0,
        size: 1,
        lastUsed: now,
        idleMs: this.opts.idleMs,
        windowMs: 0,
        lastTakeAt: now,
        lastGranted: 0,
        rttMs: 0,
      };
      const back = this.returningFor.get(key);
      if (back) this.waitFor(entry, back);
      this.entries.set(key, entry);
      return entry;
    }
    entry.lastUsed = now;
    entry.scope = scope;
    if (now >= entry.endsAt) this.lapse(entry);
    this.clip(key, entry, limit);
    return entry;
  }

  /**
   * A node's multiplier changed: every lease held for writes to it under a higher limit than
   * `limitOf(base)` now goes back at once, not at its key's next write.
   */
  clipNode(nodeId: string, limitOf: (base: number) => number): void {
    for (const [key, entry] of this.entries.entries()) {
      if (entry.scope.nodeId === nodeId) this.clip(key, entry, limitOf(entry.scope.base));
    }
  }

  /**
   * Under a lower limit (the node's multiplier fell), what is held here was leased under the
   * old one: hand it all back, and let the key's writes wait for it, so that the next take
   * is judged by Valkey against the new limit with those points already returned.
   */
  private clip(key: string, entry: Entry, limit: number): void {
    if (limit < entry.limit) {
      this.waitFor(entry, this.handBack(key, entry));
      entry.size = 1;
    }
    entry.limit = limit;
  }

  private spend(entry: Entry, cost: number, limit: number, tookLease: boolean): LeaseVerdict {
    entry.spent += cost;
    this.onPoints('spent', cost);
    return {
      allowed: true,
      remaining: Math.min(limit, Math.max(0, limit - entry.consumed) + held(entry)),
      msBeforeNext: Math.max(0, entry.endsAt - this.now()),
      consumed: entry.consumed,
      tookLease,
    };
  }

  private async take(
    key: string,
    entry: Entry,
    cost: number,
    limit: number,
    windowMs: number,
  ): Promise<LeaseVerdict> {
    const sentAt = this.now();
    const { want, pending } = this.send(key, entry, cost - held(entry), limit, windowMs, sentAt);
    entry.pending = pending;
    let lease: Lease;
    try {
      lease = await pending;
    } finally {
      if (entry.pending === pending) entry.pending = undefined;
    }
    const now = this.now();
    this.land(entry, sentAt, want, lease, windowMs, now);
    if (held(entry) >= cost && now < entry.endsAt) return this.spend(entry, cost, limit, true);
    return {
      allowed: false,
      remaining: 0,
      msBeforeNext: lease.msLeft,
      consumed: lease.consumed,
      tookLease: true,
    };
  }

  /** Send a take of at least `need` points for the key (the caller makes its writes wait). */
  private send(
    key: string,
    entry: Entry,
    need: number,
    limit: number,
    windowMs: number,
    sentAt: number,
  ): { want: number; pending: Promise<Lease> } {
    // What the key spends at its recent rate in what is left of the window (as reckoned
    // here; a lapsed one starts anew), so that a steady writer takes once for many writes.
    const msLeft = entry.endsAt > sentAt ? entry.endsAt - sentAt : windowMs;
    const sinceMs = sentAt - entry.lastTakeAt;
    const rateCap = leaseForRate(entry.lastGranted, sinceMs, msLeft);
    entry.idleMs = idleAfter(entry.lastGranted, sinceMs, this.opts.idleMs, windowMs);
    entry.windowMs = windowMs;
    const want = Math.max(need, Math.min(entry.size, rateCap));
    entry.lastTakeAt = sentAt;
    this.opts.credit?.note(key, windowMs);
    const pending = this.store.take(key, want, limit, windowMs, { need, divisor: this.divisor });
    return { want, pending };
  }

  /** What a take returned, into the key's entry. */
  private land(
    entry: Entry,
    sentAt: number,
    want: number,
    lease: Lease,
    windowMs: number,
    now: number,
  ): void {
    entry.rttMs = now - sentAt;
    if (lease.msLeft > 0) {
      const endsAt = sentAt + lease.msLeft;
      // A window that ends far later than the one held is a new one: what was held of the old
      // one lapsed while the take was under way (its points count in the old window only).
      if (endsAt > entry.endsAt + windowMs / 2) this.lapse(entry);
      entry.endsAt = Math.max(entry.endsAt, endsAt);
    }
    entry.consumed = lease.consumed;
    entry.leased += lease.granted;
    entry.lastGranted = lease.granted;
    if (lease.granted > 0) this.onPoints('leased', lease.granted);
    entry.size = nextLeaseSize(want, lease.granted);
  }

  /**
   * Admit `cost` points of a key this process took nothing for in its window, at once: the
   * key has no count in Valkey (credit.ts), and its take follows within CREDIT_BATCH_MS, with
   * the other credits of that moment (one socket write and one wake-up for them all). The
   * key's other writes wait for that take as for any other.
   */
  private credit(
    key: string,
    entry: Entry,
    cost: number,
    limit: number,
    windowMs: number,
  ): LeaseVerdict {
    const now = this.now();
    this.opts.credit?.note(key, windowMs);
    entry.spent += cost;
    // A new window, as Valkey will start it on the take: nothing reckons by this end before
    // the take lands and puts Valkey's own there.
    entry.endsAt = now + windowMs;
    entry.consumed = cost;
    let done!: () => void;
    const landed = new Promise<void>((resolve) => (done = resolve));
    this.credits.push({
      send: () => {
        const sentAt = this.now();
        let sent: { want: number; pending: Promise<Lease> };
        try {
          sent = this.send(key, entry, cost, limit, windowMs, sentAt);
        } catch (err) {
          // A take that cannot even be sent is a failed one.
          const failed = err instanceof Error ? err : new Error(String(err));
          sent = { want: cost, pending: Promise.reject(failed) };
        }
        return this.settleCredit(key, entry, sent.pending, sentAt, sent.want, windowMs, cost);
      },
      landed: done,
    });
    entry.pending = landed;
    void landed.finally(() => {
      if (entry.pending === landed) entry.pending = undefined;
    });
    this.creditTimer ??= setTimeout(() => this.flushCredits(), CREDIT_BATCH_MS);
    this.onPoints('spent', cost);
    this.onPoints('credited', cost);
    return {
      allowed: true,
      remaining: limit - cost,
      msBeforeNext: windowMs,
      consumed: cost,
      tookLease: false,
    };
  }

  /** Send every credited take waiting, in one turn of the event loop. */
  private flushCredits(): void {
    clearTimeout(this.creditTimer);
    this.creditTimer = undefined;
    const credits = this.credits;
    this.credits = [];
    for (const { send, landed } of credits) {
      // Whatever becomes of the take (even a throw), the key's writes stop waiting for it.
      const landing = Promise.resolve()
        .then(send)
        .catch(() => undefined)
        .finally(landed);
      this.returning.add(landing);
      void landing.finally(() => this.returning.delete(landing));
    }
  }

  /**
   * A credited take landed. Valkey granted at least the credit unless another process took
   * for the key meanwhile (a gateway joining, within PRESENCE_VALID_MS): then the points were
   * admitted past what Valkey granted, and are counted as over-credited, as they are when
   * the take failed (unless the write was refunded meanwhile): those go to onCreditLost,
   * which counts them in the share insured while Valkey is down. Never rejects.
   */
  private async settleCredit(
    key: string,
    entry: Entry,
    pending: Promise<Lease>,
    sentAt: number,
    want: number,
    windowMs: number,
    cost: number,
  ): Promise<void> {
    let lease: Lease | undefined;
    try {
      lease = await pending;
    } catch {
      lease = undefined;
    }
    if (lease) {
      this.land(entry, sentAt, want, lease, windowMs, this.now());
      if (lease.msLeft > 0) entry.endsAt = sentAt + lease.msLeft;
      if (lease.granted >= cost) return;
    }
    const spent = entry.spent;
    entry.spent = Math.max(0, spent - cost);
    const lost = spent - entry.spent;
    if (lost <= 0) return;
    this.onPoints('overcredited', lost);
    if (!lease) this.opts.onCreditLost?.(key, lost, windowMs);
  }

  /** The window ended: what was held of it can no longer be spent. */
  private lapse(entry: Entry): void {
    const points = held(entry);
    if (points > 0) this.onPoints('expired', points);
    entry.leased = 0;
    entry.spent = 0;
  }

  /** Give the unspent points back to their window; resolves when Valkey has them (never rejects). */
  private handBack(key: string, entry: Entry): Promise<void> {
    const points = held(entry);
    const msLeft = entry.endsAt - this.now();
    // Fewer than none held: a credit whose take has not landed; what it grants stays spent.
    if (points <= 0) return Promise.resolve();
    entry.leased = entry.spent;
    if (msLeft <= 0) {
      this.onPoints('expired', points);
      return Promise.resolve();
    }
    // Valkey's count without them, as this gateway knows it (msOut, remaining).
    entry.consumed = Math.max(0, entry.consumed - points);
    const slackMs = MIN_SLACK_MS + 2 * entry.rttMs;
    const returning = this.store.giveBack(key, points, msLeft, slackMs).then(
      (n) => {
        if (n > 0) this.onPoints('returned', n);
        if (n < points) this.onPoints('expired', points - n);
      },
      (err: unknown) => {
        this.onPoints('expired', points);
        this.opts.onReturnFailed?.(err);
      },
    );
    this.returning.add(returning);
    this.returningFor.set(key, returning);
    void returning.finally(() => {
      this.returning.delete(returning);
      if (this.returningFor.get(key) === returning) this.returningFor.delete(key);
    });
    return returning;
  }
}

/** Leased and not yet spent: the points this gateway may still admit on. */
function held(entry: Entry): number {
  return entry.leased - entry.spent;
}
