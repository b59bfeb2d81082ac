/**
 * A forwarded write and what its relay's answer settles, exactly once (after Netflix
 * concurrency-limits' listener: onSuccess, onIgnore, onDropped): claims, refunds, late charges
 * and their metrics happen here, whichever transport carried the write and the answer.
 */
import type { Event } from 'nostr-tools/pure';
import type { Identity } from '../quota/policy.js';
import type { Policy } from '../quota/policy.js';
import type { ChargePlan } from './charge-plan.js';

/**
 * What the relay said of the write: stored it; had it already (`duplicate:`); refused it
 * (`invalid:` apart); or nothing, its socket or request gone first (it may have stored it).
 */
export type RelayVerdict = 'stored' | 'duplicate' | 'refused' | 'invalid' | 'lost';

/** How authors are charged: before forwarding, on the relay's answer, or not at all. */
export type AuthorMode = 'gateway' | 'relay' | 'off';

export interface TicketTerms {
  event: Pick<Event, 'id' | 'pubkey' | 'created_at' | 'sig'>;
  mode: AuthorMode;
  /** The author's identity, charged late under `relay`. */
  author?: Identity;
  /** Forwarded on its hash alone: the relay's `invalid:` is checked before it counts. */
  unverified: boolean;
  /** Forwarded without the address's fee (a lifting tier): a `duplicate:` charges it. */
  lifted?: Identity;
  /** Kept to verify later (unverified, or `relay`): dropped otherwise. */
  kept?: Event;
  /** The policy the write was pinned to (the claim's window is its author's tier's). */
  policy: Policy;
}

/** What a settlement needs of the gateway: claims, signatures, counts. */
export interface SettleServices {
  claim(event: TicketTerms['event'], shared: boolean, policy: Policy): Promise<void>;
  verify(event: Event): boolean;
  countInvalid(): void;
  /** The write's answer is in: the event is no longer awaited here. */
  settled(event: Pick<Event, 'id' | 'sig'>): void;
}

/** What settling did, in order, and whether the relay's `invalid:` proved a forgery. */
export interface Settled {
  steps: string[];
  /** An event forwarded unverified, then refused, does not verify: counts against its connection. */
  invalid: boolean;
}

const NOTHING: Settled = { steps: [], invalid: false };

export class WriteTicket {
  private settled = false;

  constructor(
    private readonly services: SettleServices,
    private readonly plan: ChargePlan,
    readonly terms: TicketTerms,
  ) {}

  get id(): string {
    return this.terms.event.id;
  }

  /** Settle on the relay's answer: the first call counts, later ones do nothing. */
  async settle(verdict: RelayVerdict): Promise<Settled> {
    if (this.settled) return NOTHING;
    this.settled = true;
    this.services.settled(this.terms.event);
    if (this.terms.mode === 'off') return NOTHING;
    return this.terms.mode === 'relay' ? this.settleLate(verdict) : this.settleAhead(verdict);
  }

  /** `gateway`: the author paid before forwarding; nothing stored gives it back. */
  private async settleAhead(verdict: RelayVerdict): Promise<Settled> {
    const steps: string[] = [];
    const { event, kept, unverified, lifted } = this.terms;
    // Any refusal of an event forwarded on its hash is checked, not only `invalid:`: khatru
    // answers `error: failed to verify signature` for a signature it cannot even parse (r
    // past the field), which is as much a forgery.
    const refused = verdict === 'invalid' || verdict === 'refused';
    const invalid = refused && kept !== undefined && !this.services.verify(kept);
    const forgedLost = verdict === 'lost' && kept !== undefined && !this.services.verify(kept);
    if (verdict === 'refused' || verdict === 'invalid' || verdict === 'duplicate' || forgedLost) {
      if (this.plan.write.some((t) => t.decision?.receipt)) steps.push('refund-author');
      await this.plan.release();
    }
    if (invalid) {
      steps.push('invalid');
      this.services.countInvalid();
    }
    if (verdict === 'duplicate' && lifted) {
      steps.push('charge-sender');
      await this.plan.payLate(lifted);
    }
    if (verdict === 'stored' || verdict === 'duplicate') {
      steps.push('claim');
      await this.services.claim(event, !unverified, this.terms.policy);
    }
    return { steps, invalid };
  }

  /** `relay`: the author pays once the relay stored it (or may have: verified on a loss). */
  private async settleLate(verdict: RelayVerdict): Promise<Settled> {
    const { author, kept, lifted } = this.terms;
    const steps: string[] = [];
    const due =
      verdict === 'stored' ||
      (verdict === 'lost' && kept !== undefined && this.services.verify(kept));
    if (verdict === 'duplicate' && lifted) {
      steps.push('charge-sender');
      await this.plan.payLate(lifted);
    }
    if (due && author) {
      steps.push('charge-author');
      await this.plan.payLate(author);
    }
    return { steps, invalid: false };
  }
}
