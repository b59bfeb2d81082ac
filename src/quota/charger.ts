/**
 * Quota decisions, finished: the decider's raw answer as the identity's tier applies it (a
 * refusal under shadow mode admits, marked shadow_limited), counted, and in shadow mode
 * sampled to the log. Callers carry the decision out (its wording: responses.ts); they never
 * complete one.
 */
import type { QuotaDecider, QuotaDecision, QuotaRequest } from './decider.js';
import { NODE_BUDGET_POLICY } from './node-budget.js';
import type { Identity, Policy } from './policy.js';
import { SHADOW_LOG_INTERVAL_MS, shadowed } from './shadow.js';
import { after } from '../util/maybe.js';
import type { Maybe } from '../util/maybe.js';
import { IntervalSampler } from '../util/sampler.js';

/** Where decisions are counted (the gateway's Prometheus metrics). */
export interface DecisionCounts {
  countDecision(outcome: string, cls: string, node: string): void;
  countNodeBudget(outcome: string, node: string): void;
}

/** The log lines shadow mode writes. */
export interface ShadowLog {
  info(fields: object, message: string): void;
}

/** What a charger needs of the decider. */
export type Decides = Pick<
  QuotaDecider,
  'decide' | 'refund' | 'knownOverLimit' | 'chargesNode' | 'decideNode'
>;

export class Charger {
  /** Shadow-mode refusals reach the log at most once a second, each line with its count. */
  private readonly shadowLog = new IntervalSampler(SHADOW_LOG_INTERVAL_MS);

  constructor(
    private readonly decider: () => Decides,
    private readonly policy: Policy,
    private readonly counts: DecisionCounts,
    private readonly log: ShadowLog,
  ) {}

  /**
   * Charge one identity: null when nothing was charged (a cost of 0, a free tier, quotas
   * off), else the finished decision; at once when memory decides (decide). A cost of 0
   * never costs a round trip.
   */
  take(req: QuotaRequest): Maybe<QuotaDecision | null> {
    if (req.cost === 0) return null;
    return after(this.decider().decide(req), (decided) => decided && this.finish(decided, req));
  }

  /**
   * The node's write budget for a write its per-client caps admitted, under the sender's tier:
   * null (synchronously, no promise: the common case at m = 1) when the node charges nothing.
   */
  takeNode(req: QuotaRequest): Promise<QuotaDecision | null> | null {
    const decider = this.decider();
    if (req.cls !== 'write' || req.cost === 0 || !decider.chargesNode(req.nodeId)) return null;
    return decider.decideNode(req).then((decided) => decided && this.finish(decided, req));
  }

  /** Give back what a decision counted, for a write not done (best effort). */
  async giveBack(req: QuotaRequest, decision: QuotaDecision | null): Promise<void> {
    if (!decision?.receipt) return;
    await this.decider().refund(req, decision.receipt);
  }

  /** What this process already knows: the identity over its limit (finished), else null. */
  knownOverLimit(req: Omit<QuotaRequest, 'cost' | 'ip'>): QuotaDecision | null {
    const known = this.decider().knownOverLimit(req);
    if (!known) return null;
    const finished = this.finish(known, { ...req, ip: '', cost: 0 });
    return finished.admitted ? null : finished;
  }

  private finish(decision: QuotaDecision, req: QuotaRequest): QuotaDecision {
    const { identity, cls, nodeId } = req;
    const policy = req.policy ?? this.policy;
    const judged =
      decision.admitted || policy.modeOf(identity.tier) === 'enforce'
        ? decision
        : shadowed(decision);
    if (judged.policy === NODE_BUDGET_POLICY) this.counts.countNodeBudget(judged.outcome, nodeId);
    else this.counts.countDecision(judged.outcome, cls, nodeId);
    if (judged.outcome === 'shadow_limited') this.logShadowed(judged, identity, cls, nodeId);
    return judged;
  }

  private logShadowed(d: QuotaDecision, identity: Identity, cls: string, nodeId: string): void {
    const count = this.shadowLog.take();
    if (count === 0) return;
    // The identity's hash, never the identity: logs are read by many.
    this.log.info(
      {
        identity: identity.source,
        key: identity.key,
        tier: identity.tier,
        class: cls,
        node: nodeId,
        policy: d.policy,
        limit: d.limit,
        windowSec: d.windowSec,
        shadowLimited: count,
      },
      `shadow mode: would have refused (${count} since the last line)`,
    );
  }
}
