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
  private readonly nodes = new Map<string, LearnedBudget>();

  set(nodeId: string, budget: LearnedBudget): void {
    this.nodes.set(nodeId, budget);
  }

  get(nodeId: string): LearnedBudget | undefined {
    return this.nodes.get(nodeId);
  }
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
