/**
 * What the operator's Nostr policy says of one event, whichever way it enters (a WebSocket
 * EVENT or an HTTP POST of an event): refused by kind (nostr.blockedKinds) or proof of work
 * (nostr.pow), else its cost in write points (nostr.costs, discounted for work). Pure.
 */
import type { Event } from 'nostr-tools/pure';
import type { GatewayConfig } from '../config/schema.js';
import { compileCosts, eventCost, kindMatcher } from './costs.js';
import type { CostTable } from './costs.js';
import { discountedCost, workDone } from './pow.js';
import { blockedKindRefusal, powRefusal } from './refusals.js';
import { eventIdMatches } from './verify.js';

export type EventJudgement =
  | { refused: string; metric: 'BLOCKED' | 'POW' }
  | {
      refused?: undefined;
      cost: number;
      /** The id is not the hash of the content (found while judging work): a forgery. */
      forged: boolean;
      /** The id was hashed and matches (no need to hash again). */
      hashed: boolean;
    };

export class EventPolicy {
  private readonly costs: CostTable;
  private readonly blockedKind: (kind: number) => boolean;
  private readonly exemptKind: (kind: number) => boolean;
  private readonly pow: GatewayConfig['nostr']['pow'];

  constructor(nostr: GatewayConfig['nostr']) {
    this.costs = compileCosts(nostr.costs);
    this.blockedKind = kindMatcher(nostr.blockedKinds);
    this.exemptKind = kindMatcher(nostr.exemptKinds);
    this.pow = nostr.pow;
  }

  /** Whether a kind is written free of every quota (nostr.exemptKinds). */
  exempt(kind: number): boolean {
    return this.exemptKind(kind);
  }

  /** `bytes`: the size of the message the event came in (the cost's size part). */
  judge(event: Event, bytes: number): EventJudgement {
    if (this.blockedKind(event.kind)) {
      return {
        refused: blockedKindRefusal(event.kind),
        metric: 'BLOCKED',
      };
    }
    // An exempt kind (nostr.exemptKinds) costs nothing: no quota is asked, whatever its size.
    const cost = this.exemptKind(event.kind) ? 0 : eventCost(this.costs, event.kind, bytes);
    const { pow } = this;
    if (pow.minDifficulty === 0 && !pow.discount) return { cost, forged: false, hashed: false };
    // Judged on the id as claimed first (a refusal needs no hashing), then on the id the event
    // really hashes to: a forged id claiming work pays full price, as a forgery.
    const work = workDone(event.id, event.tags);
    if (work < pow.minDifficulty) {
      return {
        refused: powRefusal(work, pow.minDifficulty),
        metric: 'POW',
      };
    }
    if (!eventIdMatches(event)) return { cost, forged: true, hashed: true };
    return {
      cost: discountedCost(cost, work, pow.minDifficulty, pow.discount),
      forged: false,
      hashed: true,
    };
  }
}
