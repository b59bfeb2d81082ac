import { DEFAULT_MAX_TRACKED_CLIENTS } from '../config/schema.js';
import type { GatewayConfig, Limit, WriteBudget } from '../config/schema.js';
import type { MultiplierBoard } from '../pressure/follower/board.js';
import { InMemoryBlocks } from '../store/blocks.js';
import { StoreError } from '../store/index.js';
import type { ClientKey, Decision, QuotaLimiter, Store } from '../store/index.js';
import { WindowCounters } from '../util/window-counters.js';
import { LeaseBook } from './leases.js';
import type { LeaseEvent, LeaseSnapshot } from './leases.js';
import { effectivePoints, insuredPoints, quantiseMultiplier, secondsUntil } from './limits.js';
import { NODE_BUDGET_POLICY, NodeBudgets, budgetPoints } from './node-budget.js';
import type { NodeBudgetState } from './node-budget.js';
import type { Identity, Policy } from './policy.js';

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
}

export interface DecisionObserver {
  /** Called with the duration of each call that reached Valkey. */
  storeCall(seconds: number, ok: boolean): void;
}

type QuotaSettings = GatewayConfig['quotas'];
/** What the store side answered for one write, by the limiter or through a lease. */
type StoreVerdict = Pick<
  Decision,
  'allowed' | 'remaining' | 'msBeforeNext' | 'fromMemory' | 'roundTrip'
>;
type DecisionShape = Pick<QuotaDecision, 'policy' | 'limit' | 'windowSec' | 'multiplier'>;

/** The policy names RateLimit headers show, per class. */
const POLICY_NAMES = { write: 'writes', read: 'reads' } as const;

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
}

/**
 * The quota decision: identity -> policy -> limiter for (base x node multiplier) -> verdict.
 * Knows nothing of HTTP or WebSocket.
 *
 * One limiter per effective limit, all sharing the counter key of their (class, tier,
 * window), so a new multiplier applies at once to what was already consumed.
 */
export class QuotaDecider {
  /** One per (class, tier, window, points): bounded by the configuration, not by clients. */
  private readonly limiters = new Map<string, QuotaLimiter>();
  /** Per counter prefix; blocks record counts, so they hold for any limit and survive reloads. */
  private readonly blocks = new Map<string, InMemoryBlocks>();
  /** Per counter prefix: the in-memory share used while Valkey is down. */
  private readonly insurance = new Map<string, WindowCounters<ClientKey>>();
  private readonly observer: DecisionObserver;
  private readonly now: () => number;
  private readonly maxTrackedClients: number;
  private storeDownUntil = 0;
  /** Present while quotas.lease.enabled. */
  private leases: LeaseBook | undefined;
  /** The idle time and holders the book was made with. */
  private leaseShape = '';
  /** The nodes' write budgets and their counters. */
  private readonly nodeBudgets: NodeBudgets;

  constructor(
    private readonly store: Store,
    private readonly policy: Policy,
    private readonly board: MultiplierBoard,
    private settings: QuotaSettings,
    private readonly options: DeciderOptions = {},
  ) {
    this.observer = options.observer ?? { storeCall: () => undefined };
    this.now = options.now ?? Date.now;
    this.maxTrackedClients = options.maxTrackedClients ?? DEFAULT_MAX_TRACKED_CLIENTS;
    this.nodeBudgets = new NodeBudgets(store, options.writeBudgets ?? new Map(), this.now);
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
    if (this.leases && (!lease.enabled || shape !== this.leaseShape)) {
      // Off, or sized differently (a reload): the old book hands its points back.
      void this.leases.close();
      this.leases = undefined;
    }
    if (!lease.enabled || this.leases) return;
    this.leaseShape = shape;
    this.leases = new LeaseBook(this.store.leases, {
      holders,
      idleMs: lease.idleMs,
      maxKeys: this.maxTrackedClients,
      now: this.now,
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
    await leases?.close();
  }

  /** Apply reloaded settings; limiters for old limits are dropped. */
  reload(settings: QuotaSettings): void {
    this.settings = settings;
    this.limiters.clear();
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
  effectiveLimit(tier: string, cls: 'write' | 'read', nodeId: string) {
    const base = this.policy.limitOf(tier, cls);
    if (!base) return undefined;
    const step = this.settings.multiplierStep;
    const multiplier = quantiseMultiplier(this.board.get(nodeId).value, step);
    return { base, multiplier, points: effectivePoints(base.points, multiplier, step) };
  }

  /** Null when the request is free: quotas off, allow-listed, or a class without a limit. */
  async decide(req: QuotaRequest): Promise<QuotaDecision | null> {
    if (!this.settings.enabled) return null;
    if (this.policy.isAllowListed([req.ip, req.identity.raw])) return null;
    const limit = this.effectiveLimit(req.identity.tier, req.cls, req.nodeId);
    if (!limit) return null;
    const { base, multiplier, points } = limit;
    const key = req.identity.key;
    // Built field by field, never spread: this runs for every write and a spread costs ~2%.
    const shape: DecisionShape = {
      policy: POLICY_NAMES[req.cls],
      limit: points,
      windowSec: base.windowSec,
      multiplier,
    };

    if (this.now() >= this.storeDownUntil) {
      const started = performance.now();
      try {
        const d =
          this.leases && req.cost > 0
            ? await this.consumeLeased(this.leases, req, base, points)
            : await this.limiterFor(req.cls, req.identity.tier, base, points).consume(
                key,
                req.cost,
              );
        if (d.roundTrip) this.observer.storeCall((performance.now() - started) / 1000, true);
        return {
          outcome: d.allowed ? 'allowed' : 'limited',
          admitted: d.allowed,
          policy: shape.policy,
          limit: points,
          windowSec: base.windowSec,
          remaining: d.remaining,
          resetSec: secondsUntil(d.msBeforeNext),
          multiplier,
          fromMemory: d.fromMemory,
        };
      } catch (err) {
        if (!(err instanceof StoreError)) throw err;
        this.observer.storeCall((performance.now() - started) / 1000, false);
        // Skip Valkey for a moment: every request waiting out a timeout would stall the gateway.
        this.storeDownUntil = this.now() + this.settings.retryStoreAfterMs;
      }
    }
    return this.decideWithoutStore(req, key, base, points, shape);
  }

  /**
   * A write through this gateway's leases: the in-memory block first, then a point held here,
   * then a take from Valkey (the only round trip). Throws StoreError when Valkey fails.
   */
  private async consumeLeased(
    leases: LeaseBook,
    req: QuotaRequest,
    base: Limit,
    points: number,
  ): Promise<StoreVerdict> {
    const prefix = this.prefix(req.cls, req.identity.tier, base.windowSec);
    const key = req.identity.key;
    const blocks = this.settings.inMemoryBlock && points > 0 ? this.blocksFor(prefix) : undefined;
    const msBlocked = blocks ? blocks.msBlocked(key, points) : 0;
    if (msBlocked > 0) {
      return {
        allowed: false,
        remaining: 0,
        msBeforeNext: msBlocked,
        fromMemory: true,
        roundTrip: false,
      };
    }
    const v = await leases.consume(`${prefix}:${key}`, req.cost, points, base.windowSec * 1000, {
      nodeId: req.nodeId,
      base: base.points,
    });
    if (!v.allowed && blocks && v.consumed >= points) blocks.block(key, v.consumed, v.msBeforeNext);
    return {
      allowed: v.allowed,
      remaining: v.remaining,
      msBeforeNext: v.msBeforeNext,
      fromMemory: false,
      roundTrip: v.tookLease,
    };
  }

  /**
   * A refusal when this process already knows the identity is over its limit (its in-memory
   * block), without consuming anything or asking Valkey; null otherwise.
   */
  knownOverLimit(req: Omit<QuotaRequest, 'cost' | 'ip'>): QuotaDecision | null {
    if (!this.settings.enabled || !this.settings.inMemoryBlock) return null;
    const limit = this.effectiveLimit(req.identity.tier, req.cls, req.nodeId);
    if (!limit || limit.points <= 0) return null;
    const { base, multiplier, points } = limit;
    const blocks = this.blocks.get(this.prefix(req.cls, req.identity.tier, base.windowSec));
    const ms = blocks ? blocks.msBlocked(req.identity.key, points) : 0;
    if (ms <= 0) return null;
    return {
      outcome: 'limited',
      admitted: false,
      policy: POLICY_NAMES[req.cls],
      limit: points,
      windowSec: base.windowSec,
      remaining: 0,
      resetSec: secondsUntil(ms),
      multiplier,
      fromMemory: true,
    };
  }

  /**
   * The node's write budget, for a write its sender's own cap has admitted (call it after
   * every per-client charge of the write, once). Null when nothing is charged: quotas off,
   * a free write, a node without a budget or at m = 1 (no round trip, the hot path as
   * without budgets), an allow-listed sender or a tier whose writes are free. Otherwise one
   * plain consume of the write's cost from the node's counter in Valkey, leases on or off
   * (a lease of a budget every gateway shares would strand points the node needs).
   */
  /**
   * Whether writes to the node are charged to its budget now (it has one, quotas are on and
   * its multiplier is below 1): a synchronous check, so that the common case, m = 1, costs
   * the caller no promise.
   */
  chargesNode(nodeId: string): boolean {
    if (!this.settings.enabled || !this.nodeBudgets.get(nodeId)) return false;
    return quantiseMultiplier(this.board.get(nodeId).value, this.settings.multiplierStep) < 1;
  }

  async decideNode(req: QuotaRequest): Promise<QuotaDecision | null> {
    const budget = this.nodeBudgets.get(req.nodeId);
    if (!budget || req.cls !== 'write' || req.cost <= 0 || !this.settings.enabled) return null;
    const step = this.settings.multiplierStep;
    const multiplier = quantiseMultiplier(this.board.get(req.nodeId).value, step);
    const points = budgetPoints(budget, multiplier, step);
    if (points === undefined) return null;
    if (this.policy.isAllowListed([req.ip, req.identity.raw])) return null;
    if (!this.policy.limitOf(req.identity.tier, 'write')) return null;
    const shape: DecisionShape = {
      policy: NODE_BUDGET_POLICY,
      limit: points,
      windowSec: budget.windowSec,
      multiplier,
    };
    if (points === 0) {
      // m = 0: the node takes no writes at all; nothing to count, and it may rise any time.
      return {
        ...shape,
        outcome: 'limited',
        admitted: false,
        remaining: 0,
        resetSec: 1,
        fromMemory: true,
      };
    }
    if (this.now() >= this.storeDownUntil) {
      const started = performance.now();
      try {
        const d = await this.nodeBudgets.consume(
          req.nodeId,
          budget,
          points,
          req.cost,
          this.settings,
        );
        if (d.roundTrip) this.observer.storeCall((performance.now() - started) / 1000, true);
        return {
          ...shape,
          outcome: d.allowed ? 'allowed' : 'limited',
          admitted: d.allowed,
          remaining: d.remaining,
          resetSec: secondsUntil(d.msBeforeNext),
          fromMemory: d.fromMemory,
        };
      } catch (err) {
        if (!(err instanceof StoreError)) throw err;
        this.observer.storeCall((performance.now() - started) / 1000, false);
        this.storeDownUntil = this.now() + this.settings.retryStoreAfterMs;
      }
    }
    // Valkey down: as for client quotas (quotas.onStoreFailure). insure: this gateway's share
    // of the budget in memory, so the node stays protected; open: admitted, counted as error;
    // closed: refused as the gateway's own failure (503), never a 429.
    const mode = this.settings.onStoreFailure;
    if (mode !== 'insure') {
      const admitted = mode === 'open';
      return { ...shape, outcome: 'error', admitted, remaining: 0, resetSec: 1, fromMemory: false };
    }
    const share = insuredPoints(points, this.settings.gateways);
    const v = this.nodeBudgets.insure(req.nodeId, budget, share, req.cost);
    return {
      ...shape,
      limit: share,
      outcome: 'insured',
      admitted: v.admitted,
      remaining: v.remaining,
      resetSec: secondsUntil(v.msBeforeNext),
      fromMemory: false,
    };
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
    const budget = this.nodeBudgets.get(nodeId);
    const now = this.nodeBudgetNow(nodeId);
    if (!budget || !now) return undefined;
    const points = now.inForce ? now.points : undefined;
    const state = { ...budget, inForce: now.inForce, effective: now.points };
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
    return this.now() < this.storeDownUntil;
  }

  private decideWithoutStore(
    req: QuotaRequest,
    key: ClientKey,
    base: Limit,
    points: number,
    shape: DecisionShape,
  ): QuotaDecision {
    const mode = this.settings.onStoreFailure;
    if (mode !== 'insure') {
      const admitted = mode === 'open';
      return { ...shape, outcome: 'error', admitted, remaining: 0, resetSec: 1, fromMemory: false };
    }
    const share = insuredPoints(points, this.settings.gateways);
    const insurer = this.insurerFor(req.cls, req.identity.tier, base);
    // One counter per (class, tier, window) whatever the multiplier: the share in force is
    // compared here, so a multiplier change neither resets nor splits what was consumed.
    const res = insurer.consume(key, req.cost, base.windowSec * 1000);
    const admitted = res.consumed <= share;
    return {
      ...shape,
      limit: share,
      outcome: 'insured',
      admitted,
      remaining: Math.max(0, share - res.consumed),
      resetSec: secondsUntil(res.msBeforeNext),
      fromMemory: false,
    };
  }

  /** Counter key prefix of a (class, tier, window): shared by every limit derived from it. */
  private prefix(cls: string, tier: string, windowSec: number): string {
    return `${this.settings.keyPrefix}:${cls}:${tier}:${windowSec}`;
  }

  private limiterFor(cls: string, tier: string, base: Limit, points: number): QuotaLimiter {
    const keyPrefix = this.prefix(cls, tier, base.windowSec);
    const id = `${keyPrefix}#${points}`;
    let limiter = this.limiters.get(id);
    if (!limiter) {
      limiter = this.store.limiter({
        keyPrefix,
        points,
        duration: base.windowSec,
        // Block in memory once the limit is used up: the rest of the window costs no round trip.
        ...(this.settings.inMemoryBlock && points > 0
          ? { inMemoryBlock: { onConsumed: points, blocks: this.blocksFor(keyPrefix) } }
          : {}),
      });
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

  private insurerFor(cls: string, tier: string, base: Limit): WindowCounters<ClientKey> {
    const keyPrefix = this.prefix(cls, tier, base.windowSec);
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
    const d = await limiter.peek(identity.key);
    const lease: LeaseSnapshot | null = this.leases
      ? this.leases.snapshot(`${this.prefix(cls, identity.tier, base.windowSec)}:${identity.key}`)
      : null;
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
