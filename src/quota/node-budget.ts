/**
 * The node-level write budget (upstreams[].writeBudget): one counter per relay node in
 * Valkey, shared by every gateway, which writes to the node consume while its multiplier is
 * below 1. The per-client caps decide who is refused first (the heaviest writers); the budget
 * decides how much gets in, whoever writes, so a wave of many light identities, each far
 * under its own cap, is still held to budget x m.
 */
import type { WriteBudget } from '../config/schema.js';
import { InMemoryBlocks } from '../store/blocks.js';
import type { ClientKey, Decision, QuotaLimiter, Store } from '../store/index.js';
import { WindowCounters } from '../util/window-counters.js';
import { effectivePoints } from './limits.js';

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
  /** The node's multiplier is below 1: writes to it consume the budget. */
  inForce: boolean;
  /** Points per window now: budget x m under pressure, the base otherwise. */
  effective: number;
  /** What Valkey counts this window (null when not in force or Valkey is unreachable). */
  consumed: number | null;
}

/** What the in-memory share decided while Valkey is down. */
export interface InsuredVerdict {
  admitted: boolean;
  remaining: number;
  msBeforeNext: number;
}

/**
 * The budgets of the configured nodes and their counters: limiters on Valkey (one per
 * effective points, sharing the node's key, so a new multiplier applies at once to what was
 * consumed), in-memory blocks once a node's budget is used up (the rest of the window costs
 * no round trip), and the in-memory share used while Valkey is down. All bounded by the
 * number of nodes, never by clients.
 */
export class NodeBudgets {
  private readonly limiters = new Map<string, QuotaLimiter>();
  private blocks: InMemoryBlocks;
  private insurance: WindowCounters;
  private keyPrefix = '';

  constructor(
    private readonly store: Store,
    private readonly budgets: ReadonlyMap<string, WriteBudget>,
    private readonly now: () => number = Date.now,
  ) {
    const nodes = Math.max(1, budgets.size);
    this.blocks = new InMemoryBlocks(nodes, now);
    this.insurance = new WindowCounters(nodes, now);
  }

  /** The node's budget at m = 1; undefined when it has none. */
  get(nodeId: string): WriteBudget | undefined {
    return this.budgets.get(nodeId);
  }

  /**
   * Consume `cost` of the node's budget at `points` in Valkey (the in-memory block first when
   * `inMemoryBlock`). Throws StoreError when Valkey fails.
   */
  consume(
    nodeId: string,
    budget: WriteBudget,
    points: number,
    cost: number,
    settings: { keyPrefix: string; inMemoryBlock: boolean },
  ): Promise<Decision> {
    return this.limiterFor(budget, points, settings).consume(nodeId as ClientKey, cost);
  }

  /** The node's counter in Valkey without consuming (null when it has none this window). */
  peek(
    nodeId: string,
    budget: WriteBudget,
    points: number,
    settings: { keyPrefix: string; inMemoryBlock: boolean },
  ): Promise<Decision | null> {
    return this.limiterFor(budget, points, settings).peek(nodeId as ClientKey);
  }

  /**
   * The in-memory share of the budget while Valkey is down: `share` points per window for
   * this gateway, one counter per node whatever the multiplier (the share in force is
   * compared here, so a multiplier change neither resets nor splits what was consumed).
   */
  insure(nodeId: string, budget: WriteBudget, share: number, cost: number): InsuredVerdict {
    const res = this.insurance.consume(nodeId, cost, budget.windowSec * 1000);
    return {
      admitted: res.consumed <= share,
      remaining: Math.max(0, share - res.consumed),
      msBeforeNext: res.msBeforeNext,
    };
  }

  /** Settings were reloaded: limiters are rebuilt; counts are dropped only for a new prefix. */
  reload(keyPrefix: string): void {
    this.limiters.clear();
    if (keyPrefix === this.keyPrefix) return;
    this.keyPrefix = keyPrefix;
    const nodes = Math.max(1, this.budgets.size);
    this.blocks = new InMemoryBlocks(nodes, this.now);
    this.insurance = new WindowCounters(nodes, this.now);
  }

  private limiterFor(
    budget: WriteBudget,
    points: number,
    settings: { keyPrefix: string; inMemoryBlock: boolean },
  ): QuotaLimiter {
    if (settings.keyPrefix !== this.keyPrefix) this.reload(settings.keyPrefix);
    const keyPrefix = nodeBudgetPrefix(settings.keyPrefix);
    const id = `${budget.windowSec}#${points}`;
    let limiter = this.limiters.get(id);
    if (!limiter) {
      limiter = this.store.limiter({
        keyPrefix,
        points,
        duration: budget.windowSec,
        // Once the budget is used up, this gateway refuses writes to the node from memory
        // until the window ends: a flood past the budget costs no round trip per write.
        ...(settings.inMemoryBlock && points > 0
          ? { inMemoryBlock: { onConsumed: points, blocks: this.blocks } }
          : {}),
      });
      this.limiters.set(id, limiter);
    }
    return limiter;
  }
}
