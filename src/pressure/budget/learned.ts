/**
 * The write budgets the feeds learned (pressure/budget/estimator.ts), as this gateway holds
 * them: set by the pressure follower from each node's reports, read by the quota decider on
 * every write to a node under pressure (a plain map: no Valkey read per write).
 *
 * A budget comes with a report the follower accepted (newer than the last); one that is
 * missing or malformed (report.ts drops it) leaves the last good one in place, so garbage in
 * Valkey never removes a node's budget (never opens the node). A stale feed keeps its last
 * budget too: what the node drains does not expire with the lease, and the follower's
 * staleness rules already move its multiplier to the safe value, which scales it.
 */
import type { WriteBudget } from '../../config/schema.js';

export interface LearnedBudget {
  /** Write points per second. */
  points: number;
  /** What the feed estimates the node drains (bytes per second). */
  bytesPerSec: number;
  /** When the report carrying it was sampled (ms since the epoch). */
  ts: number;
}

export class LearnedBudgets {
  private readonly nodes = new Map<string, { learned: LearnedBudget; budget: WriteBudget }>();

  set(nodeId: string, learned: LearnedBudget): void {
    // The budget a write is charged against, made once per report, not per write.
    this.nodes.set(nodeId, { learned, budget: { points: learned.points, windowSec: 1 } });
  }

  get(nodeId: string): LearnedBudget | undefined {
    return this.nodes.get(nodeId)?.learned;
  }

  /** The learned budget as a write budget of a 1 s window (no allocation: per write). */
  budgetOf(nodeId: string): WriteBudget | undefined {
    return this.nodes.get(nodeId)?.budget;
  }
}

/**
 * The budget in force, allocation-free (it runs for every write to a node with a budget):
 * the smaller per second of the two, or whichever exists.
 */
export function smallerBudget(
  configured: WriteBudget | undefined,
  learned: WriteBudget | undefined,
): WriteBudget | undefined {
  if (!learned) return configured;
  if (!configured) return learned;
  return learned.points / learned.windowSec < configured.points / configured.windowSec
    ? learned
    : configured;
}

/**
 * The budget in force for a node: the smaller per second of the learned one and the
 * configured upstreams[].writeBudget (an explicit cap), or whichever exists. The learned one
 * has a window of 1 s.
 */
export function effectiveBudget(
  configured: WriteBudget | undefined,
  learned: LearnedBudget | undefined,
): { budget: WriteBudget; source: 'configured' | 'learned' } | undefined {
  if (!learned) return configured ? { budget: configured, source: 'configured' } : undefined;
  const fromLearned = { points: learned.points, windowSec: 1 };
  if (!configured) return { budget: fromLearned, source: 'learned' };
  return learned.points < configured.points / configured.windowSec
    ? { budget: fromLearned, source: 'learned' }
    : { budget: configured, source: 'configured' };
}
