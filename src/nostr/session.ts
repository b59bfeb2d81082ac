/**
 * One client connection's Nostr state, and every decision that reads or changes it: the
 * NIP-42 identity it bound, the subscriptions the relay holds for it, the events forwarded and
 * awaiting the relay's OK. Pure: frames and relay messages in, verdicts and actions out; the
 * caller (ws-connection.ts) does what the actions name: a write's ticket settled (its charges
 * and claims: write/ticket.ts), a frame to the relay.
 *
 * The rules it keeps, each a hole an earlier shape of this code had:
 * - State is keyed by what the gateway checked, and a later frame never rewrites an earlier
 *   one: the first frame for an event id stands, a second one while it is awaited is refused.
 * - Marks wait for the relay: each forwarded write's ticket is settled by the relay's OK for
 *   its id (or by the relay socket's close), exactly once; a first-sight claim is made on OK
 *   true, never before (see write/ticket.ts).
 * - A key costs nothing to mint: one bound pubkey per connection, and it adds a charge (the
 *   caller charges the address as well), never replaces one.
 * - What the client closes is still settled: awaited events are charged on the relay's OK
 *   after the client left, or (verified) when the relay socket closes first.
 * - Subscriptions are counted as the relay holds them: a subscription the gateway stops
 *   counting because the relay CLOSED it is closed upstream too (a relay may answer a re-REQ
 *   of an open id CLOSED and keep the old one).
 * - One challenge per connection, and its issuer answers AUTH: when the gateway issues its own
 *   (for relays without NIP-42), the relay's is withheld and no AUTH reaches the relay.
 */
import { startsCompactEvent } from './message-heads.js';
import type { Event } from 'nostr-tools/pure';
import type { RelayVerdict, WriteTicket } from '../write/ticket.js';
import { authEventProblem, MAX_CHALLENGE_LENGTH } from './nip42.js';
import {
  authAttemptsRefusal,
  AWAITED_HERE_DUPLICATE,
  AWAITING_REFUSAL,
  filtersRefusal,
  malformedRefusal,
  NO_CHALLENGE_REFUSAL,
  OTHER_PUBKEY_REFUSAL,
  SIGNATURE_REFUSAL,
  subscriptionsRefusal,
} from './refusals.js';

/** AUTH events a connection may have checked (signature included) before it is refused. */
export const MAX_AUTH_ATTEMPTS = 8;

export interface SessionSettings {
  /**
   * Whether and how event authors are charged: `gateway`, charged before the event is
   * forwarded (verified first, or hashed only and verified on the relay's `invalid:`), refunded
   * when the relay does not store it, its id claimed once the relay accepts it; `relay`,
   * charged when the relay accepts it (or, verified here, when the relay socket closes before
   * answering); `off`, authors are not charged.
   */
  author: 'gateway' | 'relay' | 'off';
  /** NIP-42 followed (nostr.publicUrl): the URL an AUTH event's relay tag must name. */
  publicUrl?: string;
  maxSubscriptions?: number;
  maxFiltersPerReq?: number;
  /** EVENTs failing verification before the connection is closed. */
  maxInvalidEvents: number;
  /** Events awaiting the relay's OK, in count and in frame bytes. */
  maxAwaiting: number;
  maxAwaitingBytes: number;
}

/** What the caller does on the session's behalf. */
export type SessionAction =
  /**
   * Do not pass this relay message on to the client: the relay's AUTH challenge, when the
   * gateway issued its own (two challenges on one connection confuse clients).
   */
  | { type: 'withhold' }
  /**
   * The relay answered a forwarded write (or its socket closed first: `lost`): settle its
   * ticket (charges, claims, counts: see write/ticket.ts).
   */
  | { type: 'settle'; ticket: WriteTicket; verdict: RelayVerdict }
  /** The relay refused the AUTH event that bound `pubkey`: it no longer identifies anyone. */
  | { type: 'unbind'; pubkey: string }
  /** Send the relay `["CLOSE", subId]`: the gateway no longer counts that subscription. */
  | { type: 'close-upstream'; subId: string };

export type AuthVerdict =
  /**
   * Bound: forwarded to the relay that issued the challenge, or answered here (`reply`, the
   * OK true) when the gateway issued it.
   */
  | { bound: string; forward: boolean; reply?: unknown[] }
  | { bound?: undefined; forward: false; reply: unknown[]; invalidSignature?: boolean };

interface Awaited {
  bytes: number;
  ticket: WriteTicket;
}

/** The relay's messages the session follows, by their heads (never a full parse of EVENTs). */
const EVENT_HEAD = /^\s*\[\s*"EVENT"/;
const CLOSED_HEAD = /^\s*\[\s*"CLOSED"\s*,\s*"((?:[^"\\]|\\.){1,256})"/;
const AUTH_HEAD = /^\s*\[\s*"AUTH"\s*,\s*"/;
const OK_HEAD =
  /^\s*\[\s*"OK"\s*,\s*"([0-9a-f]{64})"\s*,\s*(true|false)\s*,\s*"(duplicate:|invalid:)?/;
/** A challenge message is short: a longer one is not parsed (nor kept). */
const MAX_CHALLENGE_MESSAGE_BYTES = 2 * MAX_CHALLENGE_LENGTH;

export class NostrSession {
  /** EVENTs (and AUTH events) that failed verification on this connection. */
  invalidEvents = 0;
  private challenge: string | undefined;
  private authAttempts = 0;
  private bound: { pubkey: string; authId: string } | undefined;
  /** AUTH event id -> pubkey, forwarded and not answered yet (at most MAX_AUTH_ATTEMPTS). */
  private readonly authPending = new Map<string, string>();
  /** Subscription ids the relay holds for this connection (tracked under maxSubscriptions). */
  private readonly subscriptions = new Set<string>();
  private readonly awaiting = new Map<string, Awaited>();
  private awaitingBytes = 0;

  constructor(
    readonly settings: SessionSettings,
    /** The full NIP-01 check (id and signature), for pessimistic charges. */
    private readonly verify: (event: Event) => boolean,
    /**
     * The challenge the gateway issued on this connection (nostr.auth.challenge gateway, for
     * relays without NIP-42): AUTH is answered here and never forwarded, and the relay's own
     * challenge, if it sends one, is neither followed nor passed on. Needs publicUrl.
     */
    private readonly issued?: string,
  ) {
    if (issued !== undefined && settings.publicUrl === undefined) {
      throw new Error('a gateway-issued AUTH challenge needs publicUrl');
    }
    this.challenge = issued;
  }

  /** What the gateway sends the client on connect, before anything of the relay's. */
  greeting(): unknown[][] {
    return this.issued === undefined ? [] : [['AUTH', this.issued]];
  }

  /** The pubkey this connection authenticated as (NIP-42), if any. */
  get authPubkey(): string | undefined {
    return this.bound?.pubkey;
  }

  /** Whether the relay's messages carry anything the session follows. */
  get following(): boolean {
    return (
      this.awaiting.size > 0 || this.subscriptions.size > 0 || this.settings.publicUrl !== undefined
    );
  }

  /** Events forwarded and not answered by the relay yet. */
  get awaitingCount(): number {
    return this.awaiting.size;
  }

  /** Subscriptions counted as held at the relay. */
  get openSubscriptions(): number {
    return this.subscriptions.size;
  }

  /** One more EVENT that does not verify: true once the connection must close. */
  invalid(): boolean {
    this.invalidEvents++;
    return this.invalidEvents >= this.settings.maxInvalidEvents;
  }

  /**
   * `restricted:` when a REQ or COUNT has more filters than allowed, or a REQ would open one
   * subscription more than the cap (a REQ reusing an open id counts once).
   */
  reqRefusal(type: 'REQ' | 'COUNT', subId: string, filters: number): string | undefined {
    const { maxFiltersPerReq, maxSubscriptions } = this.settings;
    if (maxFiltersPerReq !== undefined && filters > maxFiltersPerReq) {
      return filtersRefusal(maxFiltersPerReq, type);
    }
    if (maxSubscriptions === undefined || type !== 'REQ') return undefined;
    if (this.subscriptions.has(subId) || this.subscriptions.size < maxSubscriptions) {
      return undefined;
    }
    return subscriptionsRefusal(maxSubscriptions);
  }

  /** A REQ went to the relay: it holds one subscription of that id from now. */
  reqForwarded(subId: string): void {
    if (this.settings.maxSubscriptions !== undefined) this.subscriptions.add(subId);
  }

  /** A CLOSE went to the relay. */
  closeForwarded(subId: string): void {
    this.subscriptions.delete(subId);
  }

  /**
   * A client's AUTH event, checked as the relay would check it (kind, this connection's
   * challenge, relay tag, created_at, and at most MAX_AUTH_ATTEMPTS signatures): it binds on
   * those checks, since some relays (nostr-rs-relay) never answer AUTH with OK; an `OK false`
   * from the relay unbinds it. A second, different pubkey is refused: a key is free to mint.
   * Under a challenge the gateway issued, the gateway's OK is the answer: nothing is forwarded.
   */
  auth(event: Event, nowSec: number): AuthVerdict {
    const notOk = (message: string, invalidSignature?: boolean): AuthVerdict => ({
      forward: false,
      reply: ['OK', event.id, false, message],
      invalidSignature,
    });
    if (this.challenge === undefined) {
      return notOk(NO_CHALLENGE_REFUSAL);
    }
    const problem = authEventProblem(event, {
      challenge: this.challenge,
      relayUrl: this.settings.publicUrl!,
      nowSec,
    });
    if (problem) return notOk(malformedRefusal(problem));
    if (this.bound && this.bound.pubkey !== event.pubkey) {
      return notOk(OTHER_PUBKEY_REFUSAL);
    }
    if (this.authAttempts >= MAX_AUTH_ATTEMPTS) {
      return notOk(authAttemptsRefusal(MAX_AUTH_ATTEMPTS));
    }
    this.authAttempts++;
    if (!this.verify(event)) {
      return notOk(SIGNATURE_REFUSAL, true);
    }
    this.bound = { pubkey: event.pubkey, authId: event.id };
    if (this.issued !== undefined) {
      return { forward: false, bound: event.pubkey, reply: ['OK', event.id, true, ''] };
    }
    this.authPending.set(event.id, event.pubkey);
    return { forward: true, bound: event.pubkey };
  }

  /**
   * Why an EVENT cannot be forwarded on this connection now, before anything is charged: its
   * id is awaited already (the first frame for an id stands), or too much is awaited.
   */
  eventRefusal(id: string, bytes: number): string | undefined {
    if (this.settings.author === 'off') return undefined;
    if (this.awaiting.has(id)) {
      return AWAITED_HERE_DUPLICATE;
    }
    const { maxAwaiting, maxAwaitingBytes } = this.settings;
    if (this.awaiting.size >= maxAwaiting || this.awaitingBytes + bytes > maxAwaitingBytes) {
      return AWAITING_REFUSAL;
    }
    return undefined;
  }

  /**
   * An EVENT went to the relay: the relay's answer to `id` settles its ticket (under `off`
   * there is none, and nothing is awaited).
   */
  eventForwarded(id: string, bytes: number, ticket: WriteTicket | undefined): void {
    if (this.settings.author === 'off' || !ticket) return;
    this.awaiting.set(id, { bytes, ticket });
    this.awaitingBytes += bytes;
  }

  /**
   * A message from the relay: what the gateway does about it (it reaches the client as is,
   * unless withheld).
   */
  relay(data: Buffer): SessionAction[] {
    // A subscription's events stream past here: one short look, and no more, for each.
    if (startsCompactEvent(data) || EVENT_HEAD.test(data.toString('latin1', 0, 16))) return [];
    const start = data.toString('latin1', 0, 400);
    const closed = CLOSED_HEAD.exec(start);
    if (closed) return this.subscriptionClosed(closed[1]!);
    if (AUTH_HEAD.test(start)) {
      if (this.issued !== undefined) return [{ type: 'withhold' }];
      this.challengeFrom(data);
      return [];
    }
    const head = OK_HEAD.exec(start);
    return head ? this.ok(head[1]!, head[2] === 'true', head[3]) : [];
  }

  /**
   * The relay socket is gone: what it never answered is settled as lost (the relay may have
   * stored it: see WriteTicket).
   */
  upstreamGone(): SessionAction[] {
    const actions: SessionAction[] = [];
    for (const { ticket } of this.awaiting.values()) {
      actions.push({ type: 'settle', ticket, verdict: 'lost' });
    }
    this.awaiting.clear();
    this.awaitingBytes = 0;
    this.subscriptions.clear();
    return actions;
  }

  private ok(id: string, accepted: boolean, prefix: string | undefined): SessionAction[] {
    const authPubkey = this.authPending.get(id);
    if (authPubkey !== undefined) {
      this.authPending.delete(id);
      if (accepted || this.bound?.authId !== id) return [];
      this.bound = undefined;
      return [{ type: 'unbind', pubkey: authPubkey }];
    }
    const awaited = this.awaiting.get(id);
    if (!awaited) return [];
    this.awaiting.delete(id);
    this.awaitingBytes -= awaited.bytes;
    return [{ type: 'settle', ticket: awaited.ticket, verdict: verdictOf(accepted, prefix) }];
  }

  private subscriptionClosed(rawId: string): SessionAction[] {
    let subId: unknown;
    try {
      subId = JSON.parse(`"${rawId}"`);
    } catch {
      return [];
    }
    if (typeof subId !== 'string' || !this.subscriptions.delete(subId)) return [];
    return [{ type: 'close-upstream', subId }];
  }

  private challengeFrom(data: Buffer): void {
    if (this.settings.publicUrl === undefined || data.length > MAX_CHALLENGE_MESSAGE_BYTES) return;
    try {
      const msg: unknown = JSON.parse(data.toString('utf8'));
      if (!Array.isArray(msg) || typeof msg[1] !== 'string') return;
      if (msg[1].length > 0 && msg[1].length <= MAX_CHALLENGE_LENGTH) this.challenge = msg[1];
    } catch {
      // Not JSON: no challenge.
    }
  }
}

/** What an OK says of the write it answers. */
function verdictOf(accepted: boolean, prefix: string | undefined): RelayVerdict {
  if (accepted) return prefix === 'duplicate:' ? 'duplicate' : 'stored';
  return prefix === 'invalid:' ? 'invalid' : 'refused';
}
