/**
 * The node-level write budget (upstreams[].writeBudget): one counter per relay node in
 * Valkey, shared by every gateway, which writes to the node consume while its multiplier is
 * below 1. The per-client caps decide who is refused first (the heaviest writers); the budget
 * decides how much gets in, whoever writes, so a wave of many light identities, each far
 * under its own cap, is still held to budget x m.
 */
import type { GatewayConfig, WriteBudget } from '../config/schema.js';
import { InMemoryBlocks } from '../store/blocks.js';
import type { ClientKey, Decision, QuotaLimiter, Store } from '../store/index.js';
import { WindowCounters } from '../util/window-counters.js';
import type { Consumer } from './consume.js';
import { LimiterConsumer, guarded } from './consumers.js';
import type { StoreBreaker } from './consumers.js';
import { effectivePoints, insuredPoints } from './limits.js';
import { effectiveBudget, smallerBudget } from '../pressure/budget/learned.js';
import type { LearnedBudget, LearnedBudgets } from '../pressure/budget/learned.js';

/** Counters kept per budget size (learned budgets change): past it, the old ones go. */
const MAX_COUNTERS = 256;

/** The policy name of the node budget in RateLimit headers and problem details. */
export const NODE_BUDGET_POLICY = 'node-budget';

/**
 * Points of a node's budget at the (already quantised) multiplier q: undefined at q = 1,
 * where the budget charges nothing; else budget x q, at least 1 while q > 0 (as client
 * quotas), 0 at q = 0.
 */
export function budgetPoints(budget: WriteBudget, q: number, step: number): number | undefined {
  return q >= 1 ? undefined : effectivePoints(budget.points, q, step);
}

/** The node's counter is `<keyPrefix>:node:<nodeId>`: one key per node, on any topology. */
export function nodeBudgetPrefix(keyPrefix: string): string {
  return `${keyPrefix}:node`;
}

/** A node's budget as the admin endpoint shows it. */
export interface NodeBudgetState extends WriteBudget {
  /** Where the budget in force comes from: the configuration, or what the feed learned. */
  source: 'configured' | 'learned';
  /** upstreams[].writeBudget, null when not configured. */
  configured: WriteBudget | null;
  /** What the node's feed learned (points/s, bytes/s, when), null when nothing yet. */
  learned: LearnedBudget | null;
  /** The node's multiplier is below 1: writes to it consume the budget. */
  inForce: boolean;
  /** Points per window now: budget x m under pressure, the base otherwise. */
  effective: number;
  /** What Valkey counts this window (null when not in force or Valkey is unreachable). */
  consumed: number | null;
}

/** The settings a node's counter is built from (reloads rebuild it). */
type BudgetSettings = Pick<
  GatewayConfig['quotas'],
  'keyPrefix' | 'inMemoryBlock' | 'onStoreFailure' | 'gateways'
>;

/**
 * The budgets of the configured nodes and their counters: one guarded Consumer per effective
 * points, whose limiters share the node's key in Valkey (so a new multiplier applies at once
 * to what was consumed), whose in-memory block refuses writes to a node whose budget is used
 * up (the rest of the window costs no round trip), and whose insured share keeps the node
 * protected while Valkey is down. All bounded by the number of nodes, never by clients.
 */
export class NodeBudgets {
  private readonly limiters = new Map<string, QuotaLimiter>();
  private readonly consumers = new Map<string, Consumer>();
  private blocks: InMemoryBlocks;
  private insurance: WindowCounters<ClientKey>;
  private keyPrefix = '';

  constructor(
    private readonly store: Store,
    private readonly budgets: ReadonlyMap<string, WriteBudget>,
    private readonly breaker: StoreBreaker,
    private readonly now: () => number = Date.now,
    /** The budgets the feeds learned (pressure on); a configured one caps them. */
    private readonly learned?: LearnedBudgets,
    /** Nodes the gateway writes to (bounds the in-memory blocks with learned budgets too). */
    nodeCount = budgets.size,
  ) {
    this.nodeCount = Math.max(1, nodeCount, budgets.size);
    this.blocks = new InMemoryBlocks(this.nodeCount, now);
    this.insurance = new WindowCounters(this.nodeCount, now);
  }

  private readonly nodeCount: number;

  /**
   * The node's budget at m = 1: the smaller per second of the learned one and the configured
   * one, or whichever exists; undefined when it has neither.
   */
  get(nodeId: string): WriteBudget | undefined {
    return smallerBudget(this.budgets.get(nodeId), this.learned?.budgetOf(nodeId));
  }

  /** The budget in force and where it comes from (admin view). */
  source(nodeId: string): ReturnType<typeof effectiveBudget> {
    return effectiveBudget(this.budgets.get(nodeId), this.learned?.get(nodeId));
  }

  /** The configured and the learned budget, each as it is (admin view). */
  parts(nodeId: string): {
    configured: WriteBudget | undefined;
    learned: LearnedBudget | undefined;
  } {
    return { configured: this.budgets.get(nodeId), learned: this.learned?.get(nodeId) };
  }

  /**
   * The node's counter at `points`, guarded: consume it with the node's id as the key. Its
   * verdict is Valkey's (or the in-memory block's), else the insured share's while Valkey is
   * down (onStoreFailure: insure), else a failure.
   */
  consumerFor(budget: WriteBudget, points: number, settings: BudgetSettings): Consumer {
    if (settings.keyPrefix !== this.keyPrefix) this.reload(settings.keyPrefix);
    const id = `${budget.windowSec}#${points}`;
    let consumer = this.consumers.get(id);
    if (!consumer) {
      // A learned budget moves (on a grid of two figures): bound what is kept of old ones.
      if (this.consumers.size >= MAX_COUNTERS) this.consumers.clear();
      const source = new LimiterConsumer(() => this.limiterFor(budget, points), points);
      consumer = guarded(source, points, {
        blocks: settings.inMemoryBlock && points > 0 ? this.blocks : undefined,
        breaker: this.breaker,
        insurance:
          settings.onStoreFailure === 'insure'
            ? {
                counters: () => this.insurance,
                share: insuredPoints(points, settings.gateways),
                windowMs: budget.windowSec * 1000,
              }
            : undefined,
      });
      this.consumers.set(id, consumer);
    }
    return consumer;
  }

  /** The node's counter in Valkey without consuming (null when it has none this window). */
  peek(
    nodeId: string,
    budget: WriteBudget,
    points: number,
    settings: { keyPrefix: string },
  ): Promise<Decision | null> {
    if (settings.keyPrefix !== this.keyPrefix) this.reload(settings.keyPrefix);
    return this.limiterFor(budget, points).peek(nodeId as ClientKey);
  }

  /** Settings were reloaded: counters are rebuilt; counts are dropped only for a new prefix. */
  reload(keyPrefix: string): void {
    this.limiters.clear();
    this.consumers.clear();
    if (keyPrefix === this.keyPrefix) return;
    this.keyPrefix = keyPrefix;
    this.blocks = new InMemoryBlocks(this.nodeCount, this.now);
    this.insurance = new WindowCounters(this.nodeCount, this.now);
  }

  private limiterFor(budget: WriteBudget, points: number): QuotaLimiter {
    const id = `${budget.windowSec}#${points}`;
    let limiter = this.limiters.get(id);
    if (!limiter) {
      if (this.limiters.size >= MAX_COUNTERS) this.limiters.clear();
      limiter = this.store.limiter({
        keyPrefix: nodeBudgetPrefix(this.keyPrefix),
        points,
        duration: budget.windowSec,
      });
      this.limiters.set(id, limiter);
    }
    return limiter;
  }
}
