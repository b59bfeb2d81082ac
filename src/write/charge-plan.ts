/**
 * The one place a write's charges are taken and given back, for both transports (after
 * rate-limiter-flexible's union of limiters: all consumed, or none kept).
 *
 * - The **fee**: what the senders (the API key or address, an AUTH pubkey) pay for asking,
 *   taken before the gateway does work for the write (verifying a signature, asking Valkey).
 *   All senders or none; once taken it stands whatever the verdict, since the work was done.
 * - The **write**: the author's quota (or a lifting tier's), then, once every per-client cap
 *   admitted it, the node's write budget. All or none: a refusal by any gives back what the
 *   others took. The relay's answer settles it (see ticket.ts): nothing stored gives it back.
 *
 * A sender's refused charge keeps what its counter counted (it is over its limit anyway, and
 * it did send the frame). A payer's refused charge is given back with the rest: a write is
 * refused on the author's quota without proof the author sent it (a replay of its event, found
 * unclaimed; a forgery on the hash), and an author's count is only what it was granted.
 */
import type { QuotaDecision, QuotaRequest } from '../quota/decider.js';
import type { Charger } from '../quota/charger.js';
import type { Identity, Policy } from '../quota/policy.js';
import { after, allOf } from '../util/maybe.js';
import type { Maybe } from '../util/maybe.js';
import { retryAfterSec } from '../quota/responses.js';

/** One identity's charge and its finished decision (null: nothing was charged). */
export interface Taken {
  identity: Identity;
  decision: QuotaDecision | null;
  /** Paid as a sender's fee, or as the write's own (the author, a lifting tier). */
  by: 'sender' | 'author';
}

/** Why a plan refused, and the decision that did. */
export interface PlanRefusal {
  by: 'sender' | 'author' | 'budget';
  decision: QuotaDecision;
  /** A sender's refused charge itself (its counter counted it, and keeps it). */
  taken?: Taken;
}

/** Where and what a write costs: the same for every line of its plan. */
export interface PlanWhere {
  ip: string;
  nodeId: string;
  cost: number;
  /** Who the node's budget is charged under: the sender (its tier decides free writes). */
  budgetPayer: Identity;
  /** The policy the write was pinned to when it began. */
  policy?: Policy;
}

export class ChargePlan {
  /** Charges the senders paid, kept. */
  readonly fee: Taken[] = [];
  /** The write's own charges, given back when the relay stores nothing. */
  readonly write: Taken[] = [];
  /** The node's budget decision, when the node charges one (under pressure). */
  node: QuotaDecision | null = null;
  /** Every charge taken, in order: what each showed, refused or given back since. */
  readonly taken: Taken[] = [];
  /**
   * The quota a client is shown (RateLimit headers): the first sender's that paid a fee, or,
   * when no sender was asked one (a lifted write), the write's first payer's.
   */
  shown: QuotaDecision | undefined;
  private feeAsked = false;

  constructor(
    private readonly charger: Charger,
    readonly where: PlanWhere,
  ) {}

  /**
   * The senders pay for what the gateway is about to do: all of them, or none. Every method
   * that charges answers at once when memory decides every charge (a leased point, a block),
   * else with a promise (Maybe).
   */
  payFee(senders: readonly Identity[]): Maybe<PlanRefusal | undefined> {
    if (senders.length === 0) return undefined;
    return after(this.takeAll(senders, 'sender'), (taken) => {
      this.show(taken, true);
      const refused = firstRefused(taken);
      if (refused) {
        const refusal = { by: 'sender' as const, decision: refused.decision!, taken: refused };
        const others = taken.filter((t) => t !== refused);
        return this.giveBackAll(others).then(() => refusal); // refund: fee-refused
      }
      this.fee.push(...taken);
      return undefined;
    });
  }

  /**
   * The write's own charges (`payers`: the author, a lifting tier), with the senders' fee in
   * the same turn when `fee` names them (their commands leave in one write), then the node's
   * budget: all or none.
   */
  payWrite(
    payers: readonly Identity[],
    fee: readonly Identity[] = [],
  ): Maybe<PlanRefusal | undefined> {
    const both = allOf([
      fee.length === 0 ? NONE : this.takeAll(fee, 'sender'),
      this.takeAll(payers, 'author'),
    ]);
    return after(both, ([feeTaken, writeTaken]) => this.settleWrite(fee, feeTaken!, writeTaken!));
  }

  private settleWrite(
    fee: readonly Identity[],
    feeTaken: readonly Taken[],
    writeTaken: readonly Taken[],
  ): Maybe<PlanRefusal | undefined> {
    this.show(feeTaken, fee.length > 0);
    this.show(writeTaken, false);
    const feeRefused = firstRefused(feeTaken);
    if (feeRefused) {
      const refusal = { by: 'sender' as const, decision: feeRefused.decision!, taken: feeRefused };
      const others = [...feeTaken, ...writeTaken].filter((t) => t !== feeRefused);
      return this.giveBackAll(others).then(() => refusal); // refund: fee-refused-with-write
    }
    this.fee.push(...feeTaken);
    const writeRefused = firstRefused(writeTaken);
    if (writeRefused) {
      const refusal = { by: 'author' as const, decision: writeRefused.decision! };
      return this.giveBackAll(writeTaken).then(() => refusal); // refund: write-refused
    }
    this.write.push(...writeTaken);
    return this.payBudget();
  }

  /** The node's budget, last: its refusal gives back the write's charges. */
  payBudget(): Maybe<PlanRefusal | undefined> {
    const pending = this.charger.takeNode(this.request(this.where.budgetPayer));
    if (!pending) return undefined;
    return this.budgetDecided(pending);
  }

  private async budgetDecided(
    pending: Promise<QuotaDecision | null>,
  ): Promise<PlanRefusal | undefined> {
    this.node = await pending;
    if (!this.node || this.node.admitted) return undefined;
    await this.release(); // refund: budget-refused
    return { by: 'budget', decision: this.node };
  }

  /** The relay stored nothing of this write: its own charges go back (the fee stands). */
  async release(): Promise<void> {
    const write = this.write.splice(0);
    await this.giveBackAll(write); // refund: release
  }

  /** A charge made after the fact (the relay's answer proved it due): kept, never refused. */
  payLate(identity: Identity): Maybe<QuotaDecision | null> {
    return this.charger.take(this.request(identity));
  }

  private show(taken: readonly Taken[], asFee: boolean): void {
    if (this.shown !== undefined || (this.feeAsked && !asFee)) return;
    if (asFee) this.feeAsked = true;
    this.shown = taken.find((t) => t.decision !== null)?.decision ?? undefined;
  }

  private request(identity: Identity): QuotaRequest {
    const { ip, nodeId, cost, policy } = this.where;
    return { identity, ip, cls: 'write', cost, nodeId, policy };
  }

  /** What an identity's charge in this plan showed (null: free, or not charged). */
  decisionOf(identity: Identity): QuotaDecision | null {
    return this.taken.find((t) => t.identity === identity)?.decision ?? null;
  }

  private takeOne(identity: Identity, by: Taken['by']): Maybe<Taken> {
    return after(this.charger.take(this.request(identity)), (decision) => {
      const taken = { identity, decision, by };
      this.taken.push(taken);
      return taken;
    });
  }

  private takeAll(identities: readonly Identity[], by: Taken['by']): Maybe<readonly Taken[]> {
    if (identities.length === 0) return NONE;
    if (identities.length === 1) return after(this.takeOne(identities[0]!, by), (t) => [t]);
    return allOf(identities.map((identity) => this.takeOne(identity, by)));
  }

  /**
   * The refusal to show for `refusal`: of every counter the same write sent again would wait
   * for, as far as this plan saw and `unseen` adds (counters not charged, known over their
   * limit), the one that frees last, so that its retry time covers them all. What the plan saw
   * a retry wait for: each charge refused (its count stays over the limit until its window
   * ends, given back or not), each sender's fee kept with less than the cost left (the retry
   * pays it again), and the node's budget refused. Errors and shadow-mode refusals never wait.
   */
  longestWait(refusal: PlanRefusal, unseen: readonly PlanRefusal[] = []): PlanRefusal {
    if (refusal.decision.outcome === 'error') return refusal;
    const { cost } = this.where;
    let longest = refusal;
    const weigh = (by: PlanRefusal['by'], d: QuotaDecision | null, kept = false) => {
      if (d === null || d.outcome === 'error' || d.outcome === 'shadow_limited') return;
      if (d.admitted && !(kept && d.remaining < cost)) return;
      if (retryAfterSec(d) > retryAfterSec(longest.decision)) {
        longest = { by, decision: d.admitted ? { ...d, admitted: false, outcome: 'limited' } : d };
      }
    };
    for (const t of this.taken) weigh(t.by, t.decision, this.fee.includes(t));
    weigh('budget', this.node);
    for (const u of unseen) weigh(u.by, u.decision);
    return longest;
  }

  private async giveBackAll(taken: readonly Taken[]): Promise<void> {
    for (const t of taken) await this.charger.giveBack(this.request(t.identity), t.decision);
  }
}

const NONE: readonly Taken[] = [];

function firstRefused(taken: readonly Taken[]): Taken | undefined {
  return taken.find((t) => t.decision !== null && !t.decision.admitted);
}
