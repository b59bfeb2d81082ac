import { DEFAULT_MAX_TRACKED_CLIENTS } from '../config/schema.js';
import type { GatewayConfig, Limit, WriteBudget } from '../config/schema.js';
import { InMemoryBlocks } from '../store/blocks.js';
import { StoreError } from '../store/index.js';
import type { ClientKey, QuotaLimiter, Store } from '../store/index.js';
import { after } from '../util/maybe.js';
import type { Maybe } from '../util/maybe.js';
import { WindowCounters } from '../util/window-counters.js';
import { refusedFromMemory } from './consume.js';
import type { Consumer, DecisionObserver, Receipt, Verdict } from './consume.js';
import { LeasedConsumer, LimiterConsumer, StoreBreaker, guarded } from './consumers.js';
import { LeaseBook } from './leases.js';
import { creditGate, longestWindowMs } from './credit.js';
import type { CreditGate, Presence } from './credit.js';
import type { LeaseEvent, LeaseSnapshot } from './leases.js';
import { effectivePoints, insuredPoints, quantiseMultiplier, secondsUntil } from './limits.js';
import type { NodeMultipliers } from './multipliers.js';
import { NODE_BUDGET_POLICY, NodeBudgets, budgetPoints } from './node-budget.js';
import type { NodeBudgetState } from './node-budget.js';
import type { LearnedBudgets } from '../pressure/budget/learned.js';
import type { Identity, Policy } from './policy.js';

export type { DecisionObserver } from './consume.js';

/**
 * allowed / limited: Valkey decided. insured: Valkey failed and the in-memory share decided.
 * error: Valkey failed and the configured failure mode (open or closed) decided.
 * shadow_limited: refused by the quota, admitted by shadow mode (set by quota/shadow.ts).
 */
export type Outcome = 'allowed' | 'limited' | 'insured' | 'error' | 'shadow_limited';

export interface QuotaRequest {
  identity: Identity;
  /** The client's address: the allow-list may name it whatever the identity is. */
  ip: string;
  cls: 'write' | 'read';
  cost: number;
  /** The relay node the request goes to: its multiplier scales the limit. */
  nodeId: string;
  /** The policy the request was pinned to when it began (see Policy.pin); else the live one. */
  policy?: Policy | undefined;
}

export interface QuotaDecision {
  outcome: Outcome;
  /** Forward the request (true) or answer it at the gateway (false). */
  admitted: boolean;
  /** The policy name shown in RateLimit headers: "writes", "reads" or "node-budget". */
  policy: string;
  limit: number;
  windowSec: number;
  remaining: number;
  /** Seconds until more quota is available. */
  resetSec: number;
  multiplier: number;
  /** Rejected from the in-memory block, with no Valkey round trip. */
  fromMemory: boolean;
  /** Where the cost was counted, for `refund`: undefined when nothing was. */
  receipt?: Receipt | undefined;
}

/** A refund is skipped this close to the end of the window it was charged in (clock slack). */
const REFUND_SLACK_MS = 100;

type QuotaSettings = GatewayConfig['quotas'];
/** A guarded counter and the window it counts in. */
interface WindowConsumer {
  windowSec: number;
  consumer: Consumer;
}
/** What a decision shows whatever the verdict: the policy and the limit in force. */
type DecisionShape = Pick<QuotaDecision, 'policy' | 'limit' | 'windowSec' | 'multiplier'>;

/** The policy names RateLimit headers show, per class. */
const POLICY_NAMES = { write: 'writes', read: 'reads' } as const;

/**
 * The one place a verdict becomes a decision. A verdict judged by a counter is allowed or
 * limited (insured while Valkey is down, against this gateway's share). A failure is no quota
 * decision: quotas.onStoreFailure open admits it, closed refuses it as the gateway's own
 * failure (503, never a 429); both are counted as errors.
 */
function decisionOf(
  v: Verdict,
  shape: DecisionShape,
  onStoreFailure: QuotaSettings['onStoreFailure'],
  now: number,
): QuotaDecision {
  // Built field by field, never spread: this runs for every write and a spread costs ~2%.
  if (v.failed) {
    return {
      outcome: 'error',
      admitted: onStoreFailure === 'open',
      policy: shape.policy,
      limit: shape.limit,
      windowSec: shape.windowSec,
      remaining: 0,
      resetSec: 1,
      multiplier: shape.multiplier,
      fromMemory: false,
      receipt: undefined,
    };
  }
  return {
    outcome: v.by === 'insurance' ? 'insured' : v.admitted ? 'allowed' : 'limited',
    admitted: v.admitted,
    policy: shape.policy,
    limit: v.limit,
    windowSec: shape.windowSec,
    remaining: v.remaining,
    resetSec: secondsUntil(v.msBeforeNext),
    multiplier: shape.multiplier,
    fromMemory: v.by === 'memory',
    receipt: v.counted ? { into: v.counted, until: now + v.msBeforeNext } : undefined,
  };
}

export interface DeciderOptions {
  observer?: DecisionObserver;
  now?: () => number;
  /**
   * Clients held in memory per quota counter (class, tier, window), in the in-memory block
   * and in the insurance counters alike; the least recently seen are forgotten past it.
   */
  maxTrackedClients?: number;
  /** Worker processes of this gateway: leases are shared by quotas.gateways x workers. */
  workers?: number;
  /** Leased points by what happened to them (metrics). */
  onLeasePoints?: (event: LeaseEvent, points: number) => void;
  /** A lease hand-back that failed (its points lapse with their window). */
  onLeaseReturnFailed?: (err: unknown) => void;
  /** Write budgets by relay node (upstreams[].writeBudget); fixed for the process. */
  writeBudgets?: ReadonlyMap<string, WriteBudget>;
  /**
   * Write budgets learned by the nodes' feeds (pressure on): each node's budget is the smaller
   * of the learned and the configured one, or whichever exists.
   */
  learnedBudgets?: LearnedBudgets;
  /** Relay nodes configured (sizes the budgets' in-memory blocks when budgets are learned). */
  nodeCount?: number;
  /**
   * Whether this process is its quotas' only taker (fleet-presence.ts): with it, one holder
   * and quotas.lease.credit, a key's first write of a window is admitted on credit.
   */
  presence?: Presence;
}

/**
 * The quota decision: identity -> policy -> counter for (base x node multiplier) -> verdict
 * -> decision. Knows nothing of HTTP or WebSocket.
 *
 * One counter per effective limit (a Consumer: the plain limiter, or the lease book around
 * it, guarded by the in-memory block, the store breaker and the insured share), all sharing
 * the key of their (class, tier, window), so a new multiplier applies at once to what was
 * already consumed.
 */
export class QuotaDecider {
  /** One per (class, tier, window, points): bounded by the configuration, not by clients. */
  private readonly limiters = new Map<string, QuotaLimiter>();
  /**
   * The guarded counter of each limiter, as decide() consumes it, by tier, class and points
   * (one window per tier and class until a reload clears them): found through strings whose
   * hashes V8 keeps, not a key built per write.
   */
  private readonly consumers = new Map<string, Map<string, Map<number, WindowConsumer>>>();
  /** Per counter prefix; blocks record counts, so they hold for any limit and survive reloads. */
  private readonly blocks = new Map<string, InMemoryBlocks>();
  /** Per counter prefix: the in-memory share used while Valkey is down. */
  private readonly insurance = new Map<string, WindowCounters<ClientKey>>();
  private readonly now: () => number;
  private readonly maxTrackedClients: number;
  /** Skips Valkey for quotas.retryStoreAfterMs after a failure, for every counter. */
  private readonly breaker: StoreBreaker;
  /** Present while quotas.lease.enabled. */
  private leases: LeaseBook | undefined;
  /** The idle time and holders the book was made with. */
  private leaseShape = '';
  /**
   * With a presence: credit for first writes, and the keys this process took for, kept
   * across lease books (a reload that makes a new one must not forget them).
   */
  private readonly credit: CreditGate | undefined;
  /** The nodes' write budgets and their counters. */
  private readonly nodeBudgets: NodeBudgets;

  constructor(
    private readonly store: Store,
    private readonly policy: Policy,
    private readonly board: NodeMultipliers,
    private settings: QuotaSettings,
    private readonly options: DeciderOptions = {},
  ) {
    this.now = options.now ?? Date.now;
    // A monotonic clock unless one is injected: a wall clock stepped forward would end the
    // filter's generations early, and forget keys whose windows still run in Valkey.
    this.credit = options.presence
      ? creditGate(options.presence, options.now ?? (() => performance.now()))
      : undefined;
    this.maxTrackedClients = options.maxTrackedClients ?? DEFAULT_MAX_TRACKED_CLIENTS;
    this.breaker = new StoreBreaker(
      this.now,
      () => this.settings.retryStoreAfterMs,
      options.observer,
    );
    this.nodeBudgets = new NodeBudgets(
      store,
      options.writeBudgets ?? new Map(),
      this.breaker,
      this.now,
      options.learnedBudgets,
      options.nodeCount ?? 0,
    );
    this.syncLeases();
    // A lower multiplier clips the leases held for its node at once, not at their next write.
    board.onChange((m) => {
      const step = this.settings.multiplierStep;
      this.leases?.clipNode(m.nodeId, (base) => effectivePoints(base, m.value, step));
    });
  }

  /** Start or stop the lease book to match the settings; stopping hands every point back. */
  private syncLeases(): void {
    const { lease } = this.settings;
    const holders = this.settings.gateways * (this.options.workers ?? 1);
    const shape = `${lease.idleMs}/${holders}`;
    this.credit?.enable(
      lease.enabled && lease.credit && holders === 1,
      longestWindowMs(this.settings),
    );
    if (this.leases && (!lease.enabled || shape !== this.leaseShape)) {
      // Off, or sized differently (a reload): the old book hands its points back.
      void this.leases.close();
      this.leases = undefined;
      this.consumers.clear();
    }
    if (!lease.enabled || this.leases) return;
    this.leaseShape = shape;
    this.consumers.clear();
    this.leases = new LeaseBook(this.store.leases, {
      holders,
      idleMs: lease.idleMs,
      maxKeys: this.maxTrackedClients,
      now: this.now,
      ...(this.credit ? { credit: this.credit, onCreditLost: this.creditLost } : {}),
      ...(this.options.onLeasePoints ? { onPoints: this.options.onLeasePoints } : {}),
      ...(this.options.onLeaseReturnFailed
        ? { onReturnFailed: this.options.onLeaseReturnFailed }
        : {}),
    });
  }

  /** Hand back every leased point (at shutdown). */
  async close(): Promise<void> {
    const leases = this.leases;
    this.leases = undefined;
    this.consumers.clear();
    await leases?.close();
  }

  /** Apply reloaded settings; limiters for old limits are dropped. */
  reload(settings: QuotaSettings): void {
    this.settings = settings;
    this.limiters.clear();
    this.consumers.clear();
    this.nodeBudgets.reload(settings.keyPrefix);
    this.syncLeases();
    // Insurance counters and blocks are kept: a reload must not hand every client a fresh
    // share. Those of prefixes no longer in use (another keyPrefix) are dropped.
    for (const map of [this.blocks, this.insurance]) {
      for (const prefix of map.keys()) {
        if (!prefix.startsWith(`${settings.keyPrefix}:`)) map.delete(prefix);
      }
    }
  }

  /**
   * The limit in force for a tier, class and node: base x the node's quantised multiplier.
   * Undefined when the class is free in that tier.
   */
  effectiveLimit(tier: string, cls: 'write' | 'read', nodeId: string, policy = this.policy) {
    const base = policy.limitOf(tier, cls);
    if (!base) return undefined;
    const step = this.settings.multiplierStep;
    const multiplier = quantiseMultiplier(this.board.get(nodeId).value, step);
    return { base, multiplier, points: effectivePoints(base.points, multiplier, step) };
  }

  /**
   * Null when the request is free: quotas off, allow-listed, or a class without a limit. At
   * once when memory decides (a leased point, a block), else a promise.
   */
  decide(req: QuotaRequest): Maybe<QuotaDecision | null> {
    if (!this.settings.enabled) return null;
    const policy = req.policy ?? this.policy;
    if (policy.isAllowListed([req.ip, req.identity.raw])) return null;
    const limit = this.effectiveLimit(req.identity.tier, req.cls, req.nodeId, policy);
    if (!limit) return null;
    const { base, multiplier, points } = limit;
    const shape: DecisionShape = {
      policy: POLICY_NAMES[req.cls],
      limit: points,
      windowSec: base.windowSec,
      multiplier,
    };
    const consumer = this.consumerFor(req.cls, req.identity.tier, base, points);
    return after(consumer.consume(req.identity.key, req.cost, req.nodeId), (v) =>
      decisionOf(v, shape, this.settings.onStoreFailure, this.now()),
    );
  }

  /**
   * Give back what a decision of decide() counted (its receipt) for a write that was not done:
   * to the counter that counted it (the lease, Valkey or the insured share), and only while
   * the window it was counted in runs. Resolves false when nothing was given back.
   */
  async refund(req: QuotaRequest, receipt: Receipt | undefined): Promise<boolean> {
    if (!receipt || !this.settings.enabled || req.cost <= 0) return false;
    if (this.now() >= receipt.until - REFUND_SLACK_MS) return false;
    const limit = this.effectiveLimit(req.identity.tier, req.cls, req.nodeId, req.policy);
    if (!limit) return false;
    const consumer = this.consumerFor(req.cls, req.identity.tier, limit.base, limit.points);
    return consumer.refund(req.identity.key, req.cost, receipt);
  }

  /**
   * A refusal when this process already knows the identity is over its limit (its in-memory
   * block; with leases, also a last take that left Valkey full and nothing held here, which
   * blocks no consume, as only a refused take does), without consuming anything or asking
   * Valkey; null otherwise.
   */
  knownOverLimit(req: Omit<QuotaRequest, 'cost' | 'ip'>): QuotaDecision | null {
    if (!this.settings.enabled || !this.settings.inMemoryBlock) return null;
    const limit = this.effectiveLimit(req.identity.tier, req.cls, req.nodeId, req.policy);
    if (!limit || limit.points <= 0) return null;
    const { base, multiplier, points } = limit;
    const prefix = this.prefix(req.cls, req.identity.tier, base.windowSec);
    const blocks = this.blocks.get(prefix);
    let ms = blocks ? blocks.msBlocked(req.identity.key, points) : 0;
    if (ms <= 0 && this.leases) ms = this.leases.msOut(`${prefix}:${req.identity.key}`, points);
    if (ms <= 0) return null;
    const shape: DecisionShape = {
      policy: POLICY_NAMES[req.cls],
      limit: points,
      windowSec: base.windowSec,
      multiplier,
    };
    return decisionOf(
      refusedFromMemory(points, ms),
      shape,
      this.settings.onStoreFailure,
      this.now(),
    );
  }

  /**
   * Whether writes to the node are charged to its budget now (it has one, quotas are on and
   * its multiplier is below 1): a synchronous check, so that the common case, m = 1, costs
   * the caller no promise.
   */
  chargesNode(nodeId: string): boolean {
    if (!this.settings.enabled || !this.nodeBudgets.get(nodeId)) return false;
    return quantiseMultiplier(this.board.get(nodeId).value, this.settings.multiplierStep) < 1;
  }

  /**
   * The node's write budget, for a write its sender's own cap has admitted (call it after
   * every per-client charge of the write, once). Null when nothing is charged: quotas off,
   * a free write, a node without a budget or at m = 1 (no round trip, the hot path as
   * without budgets), an allow-listed sender or a tier whose writes are free. Otherwise one
   * plain consume of the write's cost from the node's counter in Valkey, leases on or off
   * (a lease of a budget every gateway shares would strand points the node needs), guarded
   * as client quotas are (in-memory block, breaker, insured share).
   */
  async decideNode(req: QuotaRequest): Promise<QuotaDecision | null> {
    const budget = this.nodeBudgets.get(req.nodeId);
    if (!budget || req.cls !== 'write' || req.cost <= 0 || !this.settings.enabled) return null;
    const step = this.settings.multiplierStep;
    const multiplier = quantiseMultiplier(this.board.get(req.nodeId).value, step);
    const points = budgetPoints(budget, multiplier, step);
    if (points === undefined) return null;
    const policy = req.policy ?? this.policy;
    if (policy.isAllowListed([req.ip, req.identity.raw])) return null;
    if (!policy.limitOf(req.identity.tier, 'write')) return null;
    const shape: DecisionShape = {
      policy: NODE_BUDGET_POLICY,
      limit: points,
      windowSec: budget.windowSec,
      multiplier,
    };
    const mode = this.settings.onStoreFailure;
    // m = 0: the node takes no writes at all; nothing to count, and it may rise any time.
    if (points === 0) return decisionOf(refusedFromMemory(0, 1000), shape, mode, this.now());
    const consumer = this.nodeBudgets.consumerFor(budget, points, this.settings);
    const v = await consumer.consume(req.nodeId as ClientKey, req.cost, req.nodeId);
    return decisionOf(v, shape, mode, this.now());
  }

  /**
   * A node's write budget now, without a round trip: the points per window in force (the base
   * at m = 1, where it is not in force), its window and the quantised multiplier. Undefined
   * when the node has none.
   */
  nodeBudgetNow(nodeId: string):
    | {
        points: number;
        windowSec: number;
        basePoints: number;
        multiplier: number;
        inForce: boolean;
      }
    | undefined {
    const budget = this.nodeBudgets.get(nodeId);
    if (!budget) return undefined;
    const step = this.settings.multiplierStep;
    const multiplier = quantiseMultiplier(this.board.get(nodeId).value, step);
    const points = budgetPoints(budget, multiplier, step);
    return {
      points: points ?? budget.points,
      windowSec: budget.windowSec,
      basePoints: budget.points,
      multiplier,
      inForce: points !== undefined,
    };
  }

  /**
   * Each node's write budget now (admin view): the base, and under pressure the points in
   * force and what Valkey counts of them this window.
   */
  async nodeBudgetState(nodeId: string): Promise<NodeBudgetState | undefined> {
    const inForce = this.nodeBudgets.source(nodeId);
    const now = this.nodeBudgetNow(nodeId);
    if (!inForce || !now) return undefined;
    const budget = inForce.budget;
    const parts = this.nodeBudgets.parts(nodeId);
    const points = now.inForce ? now.points : undefined;
    const state = {
      ...budget,
      source: inForce.source,
      configured: parts.configured ?? null,
      learned: parts.learned ?? null,
      inForce: now.inForce,
      effective: now.points,
    };
    if (points === undefined || points === 0 || this.storeDown) return { ...state, consumed: null };
    try {
      const d = await this.nodeBudgets.peek(nodeId, budget, points, this.settings);
      return { ...state, consumed: d?.consumed ?? 0 };
    } catch (err) {
      if (!(err instanceof StoreError)) throw err;
      return { ...state, consumed: null };
    }
  }

  /** True while Valkey is being skipped after a failure. */
  get storeDown(): boolean {
    return this.breaker.isOpen;
  }

  /** Counter key prefix of a (class, tier, window): shared by every limit derived from it. */
  private prefix(cls: string, tier: string, windowSec: number): string {
    return `${this.settings.keyPrefix}:${cls}:${tier}:${windowSec}`;
  }

  /**
   * The counter decide() consumes for a (class, tier, window) at `points`: the plain limiter,
   * or the lease book around it while leases are on, guarded by the in-memory block, the
   * breaker and (onStoreFailure: insure) the insured share.
   */
  private consumerFor(cls: string, tier: string, base: Limit, points: number): Consumer {
    let byClass = this.consumers.get(tier);
    if (!byClass)
      this.consumers.set(tier, (byClass = new Map<string, Map<number, WindowConsumer>>()));
    let byPoints = byClass.get(cls);
    if (!byPoints) byClass.set(cls, (byPoints = new Map<number, WindowConsumer>()));
    const known = byPoints.get(points);
    if (known?.windowSec === base.windowSec) return known.consumer;
    const keyPrefix = this.prefix(cls, tier, base.windowSec);
    let source: Consumer = new LimiterConsumer(
      () => this.limiterFor(cls, tier, base, points),
      points,
    );
    const windowMs = base.windowSec * 1000;
    if (this.leases) {
      const terms = { keyPrefix, limit: points, windowMs, base: base.points };
      source = new LeasedConsumer(source, this.leases, terms);
    }
    const { inMemoryBlock, onStoreFailure, gateways } = this.settings;
    const consumer = guarded(source, points, {
      blocks: inMemoryBlock && points > 0 ? this.blocksFor(keyPrefix) : undefined,
      breaker: this.breaker,
      // One counter per (class, tier, window) whatever the multiplier: the share in force
      // is compared there, so a multiplier change neither resets nor splits what was consumed.
      insurance:
        onStoreFailure === 'insure'
          ? {
              counters: () => this.insurerFor(keyPrefix),
              share: insuredPoints(points, gateways),
              windowMs,
            }
          : undefined,
    });
    // A write pinned to the policy before a reload that changed the window is counted in
    // its own window, and does not replace the counter the reloaded policy uses.
    if (!known) byPoints.set(points, { windowSec: base.windowSec, consumer });
    return consumer;
  }

  /** The plain limiter of a (class, tier, window) at `points` (peeks and unleased consumes). */
  private limiterFor(cls: string, tier: string, base: Limit, points: number): QuotaLimiter {
    const keyPrefix = this.prefix(cls, tier, base.windowSec);
    const id = `${keyPrefix}#${points}`;
    let limiter = this.limiters.get(id);
    if (!limiter) {
      limiter = this.store.limiter({ keyPrefix, points, duration: base.windowSec });
      this.limiters.set(id, limiter);
    }
    return limiter;
  }

  private blocksFor(keyPrefix: string): InMemoryBlocks {
    let blocks = this.blocks.get(keyPrefix);
    if (!blocks) {
      blocks = new InMemoryBlocks(this.maxTrackedClients, this.now);
      this.blocks.set(keyPrefix, blocks);
    }
    return blocks;
  }

  /**
   * A credited write whose take failed (Valkey went down as it was admitted) counts in the
   * insured share, as the writes after it do: the share bounds them all.
   */
  private readonly creditLost = (bookKey: string, cost: number, windowMs: number): void => {
    if (this.settings.onStoreFailure !== 'insure') return;
    // A book key is `<counter prefix>:<client key>`, and a client key holds no ':'.
    const at = bookKey.lastIndexOf(':');
    this.insurerFor(bookKey.slice(0, at)).consume(
      bookKey.slice(at + 1) as ClientKey,
      cost,
      windowMs,
    );
  };

  private insurerFor(keyPrefix: string): WindowCounters<ClientKey> {
    let insurer = this.insurance.get(keyPrefix);
    if (!insurer) {
      insurer = new WindowCounters<ClientKey>(this.maxTrackedClients, this.now);
      this.insurance.set(keyPrefix, insurer);
    }
    return insurer;
  }

  /** Clients held in memory now, by structure: each is bounded by maxTrackedClients per prefix. */
  trackedClients(): { 'in-memory-blocks': number; insurance: number; leases?: number } {
    let blocked = 0;
    let insured = 0;
    for (const b of this.blocks.values()) blocked += b.size;
    for (const c of this.insurance.values()) insured += c.size;
    return {
      'in-memory-blocks': blocked,
      insurance: insured,
      ...(this.leases ? { leases: this.leases.size } : {}),
    };
  }

  /** Current consumption of one identity, for the admin endpoint. */
  async usage(identity: Identity, cls: 'write' | 'read', nodeId: string) {
    const limit = this.effectiveLimit(identity.tier, cls, nodeId);
    if (!limit) return null;
    const { base, points } = limit;
    const limiter = this.limiterFor(cls, identity.tier, base, points);
    const bookKey = `${this.prefix(cls, identity.tier, base.windowSec)}:${identity.key}`;
    // A write admitted on credit is in Valkey's count once its take lands: wait for it.
    await this.leases?.settled(bookKey);
    const d = await limiter.peek(identity.key);
    const lease: LeaseSnapshot | null = this.leases ? this.leases.snapshot(bookKey) : null;
    return {
      tier: identity.tier,
      limit: points,
      windowSec: base.windowSec,
      // In Valkey: points leased to any gateway count as consumed there.
      consumed: d?.consumed ?? 0,
      remaining: d ? d.remaining : points,
      resetSec: d ? secondsUntil(d.msBeforeNext) : 0,
      // This gateway's lease (leases on): leased and spent in the window, and held now.
      ...(this.leases ? { lease } : {}),
    };
  }
}
