/**
 * The Nostr session's invariants over generated interleavings (fast-check commands): client
 * frames (events, twins of events with another pubkey, forgeries, non-canonical encodings,
 * REQ/CLOSE, AUTH), relay answers in any order (accept, refuse, duplicate, never), relay
 * CLOSEDs, the client's close, the relay socket's close and Valkey failures. In process: the
 * real admission step and session, a counting quota decider, an in-memory key-value store and
 * a model relay, joined by a small pump that does what ws-connection.ts does.
 *
 * Invariants (each made to fail by the mutation named beside it; see the closing note of
 * issue 21 for the runs):
 * - sender: every forwarded EVENT was charged to the address (and to the bound AUTH pubkey,
 *   with `auth` in the order) before it was forwarded. [senders() without the address]
 * - accepted => charged: every event the relay stored was charged to its author, once per
 *   forward, attributed to that id. [upstreamGone() dropping what it holds]
 * - no forged charge: an author is charged only for an id it signed. [no hashing in relay
 *   mode and a later frame replacing the awaited one]
 * - limits: nothing is forwarded while its sender is over its limit; an author's stored events
 *   exceed its limit by at most the events in flight. [the author's in-memory block skipped]
 * - subscriptions the relay holds never exceed the cap. [no CLOSE upstream on a CLOSED]
 * - a claimed id was accepted by the relay. [the claim made when forwarding]
 * - a bound pubkey signed this connection's challenge. [the relay's challenge followed under
 *   nostr.auth.challenge gateway]
 * - under the gateway's own challenge: the client gets that challenge and never the relay's,
 *   each AUTH is answered by the gateway, and none reaches the relay. [AUTH forwarded; the
 *   relay's challenge passed on]
 * - with authRequiredForWrites, no EVENT is forwarded before a pubkey is bound.
 *
 * One configuration charges authors through the real decider, with quota leases and credit
 * for a first write as shipped (this process alone in its fleet), on an in-memory Valkey:
 * credit is an input path (a forgery's author is charged on credit, its refund may come
 * before the credited take lands), and the limits invariant holds there too, less only what
 * the accuracy contract allows while Valkey fails. [the credit gate's filter left out]
 */
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import fc from 'fast-check';
import { finalizeEvent, generateSecretKey, getPublicKey } from 'nostr-tools/pure';
import type { Event } from 'nostr-tools/pure';
import type { ConnectionFacts } from '../../../src/gateway/admission.js';
import { settleActions } from '../../helpers/settle.js';
import { initSignatureVerifier, verifySignature } from '../../../src/nostr/frames.js';
import { NostrSession } from '../../../src/nostr/session.js';
import { QuotaDecider } from '../../../src/quota/decider.js';
import type { QuotaDecision, QuotaRequest } from '../../../src/quota/decider.js';
import type { Receipt } from '../../../src/quota/consume.js';
import { after } from '../../../src/util/maybe.js';
import type { Maybe } from '../../../src/util/maybe.js';
import { FakeValkey } from '../../helpers/fake-valkey.js';
import { admissionUnderTest } from '../../helpers/fake-admission-context.js';
import type { AdmissionUnderTest } from '../../helpers/fake-admission-context.js';

const LIMIT = 6;
const CAP = 2;
const PUBLIC_URL = 'wss://relay.example.test';
/** The connection's challenge: the relay's, or under nostr.auth.challenge gateway the gateway's. */
const CHALLENGE = 'challenge-0';
/** A NIP-42 relay's own challenge in front of a gateway that issues its own. */
const RELAY_CHALLENGE = 'relay-challenge-0';
const IP = '203.0.113.9';
/** Longer than the lease book's CREDIT_BATCH_MS, after which credited takes are sent. */
const CREDIT_LANDS_MS = 8;
/** Events signed per key: twice an author's limit. */
const PER_KEY = 2 * LIMIT;

/** Quota by identity in memory, fail-closed while `failing`; every ask recorded. */
class CountingDecider {
  readonly used = new Map<string, number>();
  readonly asks: { value: string; cost: number; cls: string; admitted: boolean; id?: string }[] =
    [];
  failing = false;
  storeDown = false;
  /** The event id the pump is working on: charges are attributed to it. */
  attribution: string | undefined;

  /** Refunds by value: given back, and lost (asked while Valkey failed). */
  readonly refunds: { value: string; cost: number; id?: string; lost: boolean }[] = [];

  /** The address may send more than one author may write: the author's limit shows. */
  protected addressLimit = 4 * LIMIT;

  limitOf(value: string): number {
    return value.startsWith('ip:') ? this.addressLimit : LIMIT;
  }

  /** Valkey fails, or is back. */
  setFailing(failing: boolean): void {
    this.failing = failing;
  }

  decide(req: QuotaRequest): Maybe<QuotaDecision | null> {
    const value = req.identity.value;
    const counter = `${req.cls}:${value}`;
    const used = this.used.get(counter) ?? 0;
    const limit = this.limitOf(value);
    const admitted = !this.failing && used + req.cost <= limit;
    if (admitted) this.used.set(counter, used + req.cost);
    this.asks.push({ value, cost: req.cost, cls: req.cls, admitted, id: this.attribution });
    const d = decision(admitted, this.failing ? 'error' : undefined);
    if (admitted) {
      d.remaining = limit - used - req.cost;
      d.limit = limit;
      d.receipt = { into: 'store', until: Number.MAX_SAFE_INTEGER };
    }
    return Promise.resolve(d);
  }

  refund(req: QuotaRequest, receipt: unknown): Promise<boolean> {
    const value = req.identity.value;
    const lost = this.failing || receipt === undefined;
    this.refunds.push({ value, cost: req.cost, id: this.attribution, lost });
    if (lost) return Promise.resolve(false);
    const counter = `${req.cls}:${value}`;
    this.used.set(counter, (this.used.get(counter) ?? 0) - req.cost);
    return Promise.resolve(true);
  }

  /** Points an identity was charged and not given back, for one event id or all. */
  net(value: string, id?: string): number {
    const mine = (a: { value: string; id?: string }) =>
      a.value === value && (id === undefined || a.id === id);
    const charged = this.asks.filter((a) => mine(a) && a.admitted).length;
    const refunded = this.refunds.filter((r) => mine(r) && !r.lost).length;
    return charged - refunded;
  }

  /** What the accuracy contract lets an identity be admitted past its limit: nothing here. */
  allowance(value: string): number {
    void value;
    return 0;
  }

  /** Refunds of an identity that could not be made. */
  lost(value: string): number {
    return this.refunds.filter((r) => r.value === value && r.lost).length;
  }

  /** No node write budget here: the per-client charges are what this test is about. */
  chargesNode(): boolean {
    return false;
  }

  knownOverLimit(req: Omit<QuotaRequest, 'cost' | 'ip'>): QuotaDecision | null {
    const used = this.used.get(`${req.cls}:${req.identity.value}`) ?? 0;
    return used >= this.limitOf(req.identity.value) ? decision(false) : null;
  }
}

/**
 * Authors charged by the real decider with leases and credit, as shipped to a gateway alone in
 * its fleet, on an in-memory Valkey; the address counted as CountingDecider counts it. Asks and
 * refunds are recorded alike, so every invariant reads them the same way; `failing` fails the
 * in-memory Valkey, and the decider insures (its shipped onStoreFailure).
 */
class LeasedAuthors extends CountingDecider {
  readonly valkey = new FakeValkey(() => this.clock);
  private readonly real: QuotaDecider;
  /** The decider's clock: it moves only past the store breaker's pause, within one window. */
  private clock = Date.now();
  private readonly windowEnds = this.clock + 30_000;
  /** Points admitted on the insured share, by identity: the contract's allowance while Valkey fails. */
  readonly insured = new Map<string, number>();
  /** Leased points by what happened to them. */
  readonly points = { credited: 0, overcredited: 0 };
  /** The authors' limits are what this configuration is about: the address rarely binds. */
  protected override addressLimit = 20 * LIMIT;
  /** Lease takes that failed, by counter key (`<prefix>:<client key>`). */
  private readonly failedTakes = new Map<string, number>();
  /** Each author's client key, as the decider was asked. */
  private readonly keyOf = new Map<string, string>();

  constructor(under: AdmissionUnderTest) {
    super();
    const { leases } = this.valkey;
    const take = leases.take.bind(leases);
    leases.take = (key, ...rest) => {
      const taking = take(key, ...rest);
      taking.catch(() => this.failedTakes.set(key, (this.failedTakes.get(key) ?? 0) + 1));
      return taking;
    };
    const { policy, board } = under.ctx;
    this.real = new QuotaDecider(this.valkey.store, policy, board, under.config.quotas, {
      now: () => this.clock,
      presence: { alone: () => true },
      onLeasePoints: (event, n) => {
        if (event === 'credited' || event === 'overcredited') this.points[event] += n;
      },
    });
  }

  /** As the decider answers: at once from memory (a leased point, a credit), else later. */
  override decide(req: QuotaRequest): Maybe<QuotaDecision | null> {
    const value = req.identity.value;
    if (!value.startsWith('pk:')) return super.decide(req);
    this.keyOf.set(value, req.identity.key);
    const ask = { value, cost: req.cost, cls: req.cls, admitted: false, id: this.attribution };
    this.asks.push(ask);
    return after(this.real.decide(req), (d) => {
      ask.admitted = d === null || d.admitted;
      if (d?.admitted && d.outcome === 'insured') {
        this.insured.set(value, (this.insured.get(value) ?? 0) + req.cost);
      }
      return d;
    });
  }

  override async refund(req: QuotaRequest, receipt: unknown): Promise<boolean> {
    const value = req.identity.value;
    if (!value.startsWith('pk:')) return super.refund(req, receipt);
    const id = this.attribution;
    const given = await this.real.refund(req, receipt as Receipt | undefined);
    this.refunds.push({ value, cost: req.cost, id, lost: !given });
    return given;
  }

  override knownOverLimit(req: Omit<QuotaRequest, 'cost' | 'ip'>): QuotaDecision | null {
    if (!req.identity.value.startsWith('pk:')) return super.knownOverLimit(req);
    return this.real.knownOverLimit(req);
  }

  /**
   * At once, as a real Valkey fails (a credited take in flight fails too); when it is back,
   * the clock moves past the breaker's pause (quotas.retryStoreAfterMs), so Valkey is asked
   * again.
   */
  override setFailing(failing: boolean): void {
    const recovers = this.failing && !failing;
    super.setFailing(failing);
    this.valkey.failing = failing;
    if (recovers) this.clock = Math.min(this.clock + 1001, this.windowEnds);
  }

  /**
   * Past its limit while Valkey fails (the accuracy contract): what the insured share
   * admitted, and a credit whose take failed (never counted in Valkey), bounded here by the
   * author's failed takes. A credited take Valkey refused allows nothing.
   */
  override allowance(value: string): number {
    const key = this.keyOf.get(value);
    let failed = 0;
    for (const [counter, n] of this.failedTakes) if (counter.endsWith(`:${key}`)) failed += n;
    return (this.insured.get(value) ?? 0) + failed;
  }

  close(): Promise<void> {
    return this.real.close();
  }
}

function decision(admitted: boolean, outcome?: 'error'): QuotaDecision {
  return {
    outcome: outcome ?? (admitted ? 'allowed' : 'limited'),
    admitted,
    policy: 'writes',
    limit: LIMIT,
    windowSec: 60,
    remaining: 0,
    resetSec: 1,
    multiplier: 1,
    fromMemory: false,
  };
}

/** Keys, their events (signed once: signing is dear) and their AUTH events. */
const keys = [0, 1, 2].map(() => generateSecretKey());
const pubkeys = keys.map((sk) => getPublicKey(sk));
const now = Math.floor(Date.now() / 1000);
const genuine: Event[] = keys.flatMap((sk, k) =>
  Array.from({ length: PER_KEY }, (_, n) =>
    finalizeEvent({ kind: 1, created_at: now + n, tags: [], content: `${k}/${n}` }, sk),
  ),
);
const authEventFor = (sk: Uint8Array, challenge: string) =>
  finalizeEvent(
    {
      kind: 22242,
      created_at: now,
      tags: [
        ['relay', PUBLIC_URL],
        ['challenge', challenge],
      ],
      content: '',
    },
    sk,
  );
/** One per key over the connection's challenge, and key 0's over the relay's (never binds). */
const authEvents = [
  ...keys.map((sk) => authEventFor(sk, CHALLENGE)),
  authEventFor(keys[0]!, RELAY_CHALLENGE),
];
/**
 * The model relay's signature check, remembered per event: the events a run can send are a
 * few hundred (the signed ones and their variants), and schnorr verification is what a run
 * would otherwise spend its time on. Each verdict is still the real verifier's.
 */
const verdicts = new Map<string, boolean>();
function relayVerifies(event: Event): boolean {
  const { id, pubkey, sig, kind, created_at, tags, content } = event;
  const key = JSON.stringify([id, pubkey, sig, kind, created_at, tags, content]);
  let verdict = verdicts.get(key);
  if (verdict === undefined) verdicts.set(key, (verdict = verifySignature(event)));
  return verdict;
}

/** Which (id, pubkey) pairs were really signed. */
const signedPairs = new Set([...genuine, ...authEvents].map((e) => `${e.id}:${e.pubkey}`));

type Variant = 'genuine' | 'twin' | 'forged' | 'uppercase';

/** An event as a client might send it: genuine, or one of the ways to abuse one. */
function variantOf(event: Event, variant: Variant, other: number): Event {
  switch (variant) {
    case 'genuine':
      return event;
    case 'twin': {
      // The real id, another key's pubkey and signature: its id no longer hashes.
      const victim = genuine[other * PER_KEY]!;
      return { ...event, pubkey: victim.pubkey, sig: victim.sig };
    }
    case 'forged':
      return { ...event, content: `${event.content} (changed)` };
    case 'uppercase':
      return { ...event, sig: event.sig.toUpperCase() };
  }
}

interface Config {
  name: string;
  order: ('auth' | 'pubkey' | 'ip')[];
  verify: 'auto' | 'relay';
  auth: boolean;
  /** nostr.auth.challenge: whose challenge the client answers. */
  challenge: 'relay' | 'gateway';
  authRequiredForWrites: boolean;
  /** Authors charged by the real decider with leases and credit (LeasedAuthors). */
  leases: boolean;
  /** The relay answers a REQ of an open id CLOSED and keeps the old subscription. */
  relayKeepsOnReReq: boolean;
  /**
   * The relay never answers AUTH (nostr-rs-relay 0.8); under the gateway's challenge, whether
   * the relay speaks NIP-42 at all (sends its own challenge).
   */
  relayAnswersAuth: boolean;
  /** The relay answers an id it holds OK true before checking the frame's signature. */
  relayTrustsKnownIds: boolean;
}

/** A relay as the gateway sees it: what it holds, what it has not answered, what it says. */
class ModelRelay {
  readonly stored = new Map<string, Event>();
  readonly storedFresh: Event[] = [];
  readonly held = new Set<string>();
  readonly pendingEvents: Event[] = [];
  readonly pendingAuth: Event[] = [];
  /** Messages on their way to the gateway, in order. */
  readonly outbox: unknown[][] = [];
  maxHeld = 0;
  /** AUTH frames that reached the relay. */
  authReceived = 0;
  /** Answers `OK true` that are not `duplicate:`, by pubkey: what the relay says it stored. */
  readonly storedAnswers = new Map<string, number>();

  constructor(private readonly config: Config) {
    if (config.challenge === 'gateway') {
      if (config.relayAnswersAuth) this.outbox.push(['AUTH', RELAY_CHALLENGE]);
    } else if (config.auth) this.outbox.push(['AUTH', CHALLENGE]);
  }

  receive(msg: unknown[]): void {
    const [verb, a] = msg as [string, unknown];
    if (verb === 'EVENT') this.pendingEvents.push(a as Event);
    else if (verb === 'AUTH') {
      this.authReceived++;
      this.pendingAuth.push(a as Event);
    } else if (verb === 'REQ') {
      const subId = a as string;
      if (this.held.has(subId) && this.config.relayKeepsOnReReq) {
        this.outbox.push(['CLOSED', subId, 'duplicate: subscription already open']);
      } else {
        this.held.add(subId);
        this.outbox.push(['EOSE', subId]);
      }
    } else if (verb === 'CLOSE') this.held.delete(a as string);
    this.maxHeld = Math.max(this.maxHeld, this.held.size);
  }

  /** Answer one pending event: store it if it verifies, is canonical and `accept`. */
  answer(pick: number, accept: boolean): void {
    if (this.pendingEvents.length === 0) return;
    const [event] = this.pendingEvents.splice(pick % this.pendingEvents.length, 1);
    const canonical = /^[0-9a-f]{128}$/.test(event!.sig);
    if (this.config.relayTrustsKnownIds && this.stored.has(event!.id)) {
      this.countStoredAnswer(event!.pubkey);
      this.outbox.push(['OK', event!.id, true, '']);
    } else if (!relayVerifies(event!) || !canonical) {
      this.outbox.push(['OK', event!.id, false, 'invalid: bad signature']);
    } else if (!accept) {
      this.outbox.push(['OK', event!.id, false, 'rate-limited: the relay says slow down']);
    } else if (this.stored.has(event!.id)) {
      this.outbox.push(['OK', event!.id, true, 'duplicate: have it']);
    } else {
      this.stored.set(event!.id, event!);
      this.storedFresh.push(event!);
      this.countStoredAnswer(event!.pubkey);
      this.outbox.push(['OK', event!.id, true, '']);
    }
  }

  private countStoredAnswer(pubkey: string): void {
    this.storedAnswers.set(pubkey, (this.storedAnswers.get(pubkey) ?? 0) + 1);
  }

  answerAuth(accept: boolean): void {
    const event = this.pendingAuth.shift();
    if (!event || !this.config.relayAnswersAuth) return;
    this.outbox.push(['OK', event.id, accept, accept ? '' : 'restricted: not welcome']);
  }
}

/** One connection through the real admission step and session to the model relay. */
class World {
  readonly under: AdmissionUnderTest;
  readonly decider: CountingDecider;
  readonly relay: ModelRelay;
  readonly conn: ConnectionFacts;
  clientOpen = true;
  upstreamOpen = true;
  /** Forwarded EVENTs: id -> times. */
  readonly forwards = new Map<string, number>();
  maxAwaiting = 0;
  /** What reached the client: the gateway's answers and greeting, the relay's messages. */
  readonly clientGot: unknown[][] = [];
  /** AUTH events the client sent: id -> times. */
  readonly authSent = new Map<string, number>();
  /** Forwarded EVENTs: id -> pubkey (as sent). */
  readonly pubkeyOf = new Map<string, string>();
  /** Events by pubkey the gateway never got an answer for: the relay socket closed first. */
  readonly unanswered = new Map<string, number>();

  constructor(readonly config: Config) {
    this.under = admissionUnderTest(
      {
        identity: { order: config.order },
        nostr: {
          verify: config.verify,
          maxSubscriptions: CAP,
          authRequiredForWrites: config.authRequiredForWrites,
          auth: { challenge: config.challenge },
          ...(config.auth ? { publicUrl: PUBLIC_URL } : {}),
        },
        quotas: { tiers: { default: { write: { points: LIMIT, windowSec: 60 } } } },
        // One connection from one address: a small bound keeps each run's per-client
        // structures (allocated up front) cheap to make.
        limits: { framesPerSecPerAddress: 1_000_000, maxTrackedClients: 64 },
      },
      [],
    );
    this.decider = config.leases ? new LeasedAuthors(this.under) : new CountingDecider();
    this.under.ctx.decider = this.decider as unknown as QuotaDecider;
    this.relay = new ModelRelay(config);
    const { admission } = this.under;
    // The gateway's challenge is random per connection: a known one here, to sign AUTH once.
    const session =
      config.challenge === 'gateway'
        ? new NostrSession(admission.sessionSettings(), verifySignature, CHALLENGE)
        : admission.newSession();
    this.conn = { ip: IP, nodeId: 'relay-a', session };
    this.clientGot.push(...session.greeting());
  }

  /** A client frame through the admission step; forwarded frames reach the relay. */
  async client(msg: unknown[]): Promise<void> {
    if (!this.clientOpen) return;
    const isEvent = msg[0] === 'EVENT';
    const event = isEvent ? (msg[1] as Event) : undefined;
    const bound = this.conn.session.authPubkey;
    this.decider.attribution = event?.id;
    const asked = this.decider.asks.length;
    const verdict = await this.under.admission.frame(
      this.conn,
      Buffer.from(JSON.stringify(msg)),
      false,
    );
    this.decider.attribution = undefined;
    if (verdict.reply) this.clientGot.push(verdict.reply);
    if (msg[0] === 'AUTH') {
      const id = (msg[1] as Event).id;
      this.authSent.set(id, (this.authSent.get(id) ?? 0) + 1);
    }
    if (verdict.close) this.clientOpen = false;
    if (!verdict.forward) return;
    if (event && this.config.authRequiredForWrites) {
      assert.ok(bound !== undefined, `forwarded ${event.id.slice(0, 8)} before AUTH`);
    }
    if (event) {
      const charges = this.decider.asks.slice(asked);
      // Sender: the address, and the bound pubkey besides, before forwarding.
      const senders = [`ip:${IP}`];
      if (bound !== undefined && this.config.order.includes('auth')) senders.push(`auth:${bound}`);
      for (const s of senders) {
        assert.ok(
          charges.some((c) => c.value === s && c.admitted),
          `forwarded ${event.id.slice(0, 8)} without charging ${s}: ${JSON.stringify(charges)}`,
        );
      }
      this.forwards.set(event.id, (this.forwards.get(event.id) ?? 0) + 1);
      this.pubkeyOf.set(event.id, event.pubkey);
    }
    if (this.upstreamOpen) this.relay.receive(msg);
    this.maxAwaiting = Math.max(this.maxAwaiting, this.conn.session.awaitingCount);
  }

  /** Deliver the relay's next `n` messages to the session, doing what it asks. */
  async deliver(n: number): Promise<void> {
    for (let i = 0; i < n && this.upstreamOpen && this.relay.outbox.length > 0; i++) {
      const msg = this.relay.outbox.shift()!;
      const { session } = this.conn;
      let pass = true;
      if (session.following) {
        for (const action of session.relay(Buffer.from(JSON.stringify(msg)))) {
          if (action.type === 'withhold') {
            reached.withhold++;
            pass = false;
          } else await this.act(action);
        }
      }
      if (pass && this.clientOpen) this.clientGot.push(msg);
    }
  }

  async upstreamGone(): Promise<void> {
    if (!this.upstreamOpen) return;
    this.upstreamOpen = false;
    this.clientOpen = false;
    const lostIds = [
      ...this.relay.pendingEvents.map((e) => e.id),
      ...this.relay.outbox.filter((m) => m[0] === 'OK').map((m) => m[1] as string),
    ];
    for (const id of lostIds) {
      const pk = this.pubkeyOf.get(id);
      if (pk !== undefined) this.unanswered.set(pk, (this.unanswered.get(pk) ?? 0) + 1);
    }
    const actions = this.conn.session.upstreamGone();
    for (const action of actions) {
      const steps = await this.act(action);
      reached.pessimistic += steps.filter((s) => s !== 'claim shared=true').length;
    }
  }

  private async act(action: ReturnType<ConnectionFacts['session']['relay']>[number]) {
    if (action.type === 'close-upstream') {
      reached['close-upstream']++;
      if (this.upstreamOpen) this.relay.receive(['CLOSE', action.subId]);
      return [];
    }
    this.decider.attribution = action.type === 'settle' ? action.ticket.id : undefined;
    const steps = await settleActions(this.conn.session, [action]);
    this.decider.attribution = undefined;
    for (const step of steps) {
      const name = step.startsWith('claim') ? 'claim' : step;
      if (name in reached) reached[name as keyof typeof reached]++;
      if (name === 'close') this.clientOpen = false;
    }
    return steps;
  }

  /** What must hold at every step. */
  checkAlways(): void {
    const bound = this.conn.session.authPubkey;
    if (bound !== undefined) {
      reached.bound++;
      const signed = authEvents.some(
        (e) => e.pubkey === bound && this.authSent.has(e.id) && e.tags[1]![1] === CHALLENGE,
      );
      assert.ok(signed, `bound ${bound.slice(0, 8)}, which never signed this challenge`);
    }
    if (this.config.challenge === 'gateway') this.checkGatewayChallenge();
    assert.ok(this.relay.held.size <= CAP, `the relay holds ${this.relay.held.size} > ${CAP}`);
    for (const key of this.under.kv.keys.keys()) {
      const id = /seen:\{([0-9a-f]{64})\}/.exec(key)?.[1];
      if (id) assert.ok(this.relay.stored.has(id), `claimed ${id.slice(0, 8)}, never accepted`);
    }
    for (const ask of this.decider.asks) {
      if (!ask.value.startsWith('pk:')) continue;
      assert.ok(
        ask.id !== undefined && signedPairs.has(`${ask.id}:${ask.value.slice(3)}`),
        `charged ${ask.value.slice(0, 11)} for ${ask.id?.slice(0, 8)}, which it did not sign`,
      );
    }
  }

  /** Under the gateway's own challenge: one challenge, the gateway's; AUTH answered here. */
  private checkGatewayChallenge(): void {
    assert.equal(this.relay.authReceived, 0, 'an AUTH frame reached the relay');
    const challenges = this.clientGot.filter((m) => m[0] === 'AUTH');
    assert.deepEqual(challenges, [['AUTH', CHALLENGE]], 'the client got one challenge: ours');
    for (const [id, sent] of this.authSent) {
      const answers = this.clientGot.filter((m) => m[0] === 'OK' && m[1] === id).length;
      assert.equal(answers, sent, `AUTH ${id.slice(0, 8)} sent ${sent}, answered ${answers}`);
    }
  }

  /** What must hold once everything is settled (the relay socket closed). */
  checkSettled(): void {
    const authorCharged = this.config.order.includes('pubkey');
    for (const event of this.relay.storedFresh) {
      const value = `pk:${event.pubkey}`;
      const asked = this.decider.asks.filter((a) => a.id === event.id && a.value === value);
      if (authorCharged) {
        assert.ok(asked.length >= 1, `stored ${event.id.slice(0, 8)}, its author never charged`);
      }
      // Net of refunds: what the author still pays for this id.
      const paid = this.decider.net(value, event.id);
      assert.ok(
        paid <= (this.forwards.get(event.id) ?? 0),
        `${event.id.slice(0, 8)} charged ${paid} times for its forwards`,
      );
    }
    if (!authorCharged) return;
    for (const pk of pubkeys) {
      const stored = this.relay.storedFresh.filter((e) => e.pubkey === pk).length;
      const bound =
        (this.config.verify === 'relay' ? LIMIT + this.maxAwaiting : LIMIT) +
        this.decider.allowance(`pk:${pk}`);
      assert.ok(stored <= bound, `${stored} events of one author stored, bound ${bound}`);
      if (this.config.verify === 'relay') continue;
      // An author pays for what the relay said it stored (or never answered), and for no event
      // it refused or had already.
      const paid = this.decider.net(`pk:${pk}`);
      const answered = this.relay.storedAnswers.get(pk) ?? 0;
      const open = (this.unanswered.get(pk) ?? 0) + this.decider.lost(`pk:${pk}`);
      assert.ok(
        paid <= answered + open,
        `an author pays ${paid} for ${answered} events the relay stored (${open} unanswered or refunds lost)`,
      );
    }
  }
}

/** How often each path was taken: an invariant never exercised proves nothing. */
const reached = {
  'charge-author': 0,
  'refund-author': 0,
  invalid: 0,
  close: 0,
  'charge-sender': 0,
  claim: 0,
  unbind: 0,
  'close-upstream': 0,
  withhold: 0,
  pessimistic: 0,
  stored: 0,
  bound: 0,
  credited: 0,
  overcredited: 0,
  insured: 0,
};

type Cmd = fc.AsyncCommand<object, World>;

function cmd(label: string, run: (w: World) => Promise<void> | void): Cmd {
  return {
    check: () => true,
    run: async (_m, w) => {
      await run(w);
      w.checkAlways();
    },
    toString: () => label,
  };
}

const eventCommand = fc
  .record({
    e: fc.nat(genuine.length - 1),
    variant: fc.constantFrom<Variant>('genuine', 'genuine', 'twin', 'forged', 'uppercase'),
    other: fc.nat(2),
  })
  .map(({ e, variant, other }) =>
    cmd(`EVENT ${e} ${variant} ${other}`, (w) =>
      w.client(['EVENT', variantOf(genuine[e]!, variant, other)]),
    ),
  );
const answerCommand = fc
  .record({ pick: fc.nat(7), accept: fc.constantFrom(true, true, false) })
  .map(({ pick, accept }) =>
    cmd(`relay answers ${pick} ${accept}`, (w) => w.relay.answer(pick, accept)),
  );
const deliverCommand = fc
  .integer({ min: 1, max: 4 })
  .map((n) => cmd(`deliver ${n}`, (w) => w.deliver(n)));

const reqCommand = fc
  .constantFrom('a', 'b', 'c')
  .map((s) => cmd(`REQ ${s}`, (w) => w.client(['REQ', s, { kinds: [1] }])));

/**
 * One author's events one after the other, from the `from`th on, each answered: the author's
 * limit shows (events already sent are duplicates, which cost nothing). Spaced: with leases,
 * the credited takes land between them, as between an author's writes minutes apart.
 */
const burstCommand = fc
  .record({
    key: fc.nat(2),
    from: fc.nat(PER_KEY - 1),
    count: fc.integer({ min: 1, max: PER_KEY }),
    spaced: fc.boolean(),
  })
  .map(({ key, from, count, spaced }) =>
    cmd(`burst of ${count} from ${key} at ${from}${spaced ? ', spaced' : ''}`, async (w) => {
      for (let n = from; n < Math.min(from + count, PER_KEY); n++) {
        await w.client(['EVENT', genuine[key * PER_KEY + n]!]);
        w.relay.answer(Number.MAX_SAFE_INTEGER, true);
        await w.deliver(Number.MAX_SAFE_INTEGER);
        if (spaced && w.config.leases) await sleep(CREDIT_LANDS_MS);
      }
    }),
  );
/** A twin (same id, another key's pubkey and signature) of an event the relay stored. */
const twinCommand = fc.record({ pick: fc.nat(20), other: fc.nat(2) }).map(({ pick, other }) =>
  cmd(`twin of stored ${pick} as ${other}`, (w) => {
    const stored = w.relay.storedFresh;
    if (stored.length === 0) return;
    return w.client(['EVENT', variantOf(stored[pick % stored.length]!, 'twin', other)]);
  }),
);

/**
 * Time passes for the credited takes (sent in batches, CREDIT_BATCH_MS after their credit):
 * they land, as they would between an author's writes minutes apart. Only with leases.
 */
const creditsLandCommand = fc.constant(
  cmd('credited takes land', async (w) => {
    if (w.config.leases) await sleep(CREDIT_LANDS_MS);
  }),
);

/** Weighted by repetition: events, answers and deliveries are most of a connection's life. */
const commands = [
  creditsLandCommand,
  burstCommand,
  twinCommand,
  eventCommand,
  eventCommand,
  eventCommand,
  answerCommand,
  answerCommand,
  deliverCommand,
  deliverCommand,
  deliverCommand,
  reqCommand,
  reqCommand,
  fc.constantFrom('a', 'b', 'c').map((s) => cmd(`CLOSE ${s}`, (w) => w.client(['CLOSE', s]))),
  fc
    .nat(authEvents.length - 1)
    .map((k) => cmd(`AUTH ${k}`, (w) => w.client(['AUTH', authEvents[k]]))),
  fc.boolean().map((ok) => cmd(`relay answers AUTH ${ok}`, (w) => w.relay.answerAuth(ok))),
  fc.boolean().map((failing) =>
    cmd(`valkey ${failing ? 'fails' : 'back'}`, (w) => {
      w.decider.setFailing(failing);
      w.under.kv.failing = failing;
    }),
  ),
  fc.constantFrom(
    cmd('client closes', (w) => {
      w.clientOpen = false;
    }),
    cmd('relay socket closes', (w) => w.upstreamGone()),
  ),
];

const configs: Config[] = [
  { name: 'gateway verifies', order: ['pubkey', 'ip'], verify: 'auto' },
  { name: 'relay verifies', order: ['pubkey', 'ip'], verify: 'relay' },
  { name: 'AUTH and relay verifies', order: ['auth', 'pubkey', 'ip'], verify: 'relay', auth: true },
  { name: 'AUTH only', order: ['auth', 'ip'], verify: 'auto', auth: true },
  {
    name: "the gateway's challenge, auth required",
    order: ['auth', 'pubkey', 'ip'],
    verify: 'auto',
    auth: true,
    challenge: 'gateway',
    authRequiredForWrites: true,
  },
  {
    name: "the gateway's challenge, relay verifies",
    order: ['auth', 'pubkey', 'ip'],
    verify: 'relay',
    auth: true,
    challenge: 'gateway',
  },
  {
    name: 'leases and credit, gateway verifies',
    order: ['pubkey', 'ip'],
    verify: 'auto',
    leases: true,
  },
].map(
  (c) =>
    ({
      auth: false,
      challenge: 'relay',
      authRequiredForWrites: false,
      leases: false,
      ...c,
    }) as Config,
);

/**
 * fc.assert, with the broken invariant's own message in the failure (fast-check keeps it as
 * the error's cause, which the test runner's report leaves out).
 */
async function assertShowingCause<Ts>(
  property: fc.IAsyncProperty<Ts>,
  params: fc.Parameters<Ts>,
): Promise<void> {
  try {
    await fc.assert(property, params);
  } catch (err) {
    const cause = (err as { cause?: unknown }).cause;
    if (!(err instanceof Error) || cause === undefined) throw err;
    err.message += `\nBroken: ${cause instanceof Error ? cause.message : JSON.stringify(cause)}`;
    throw err;
  }
}

describe('credit for a first write, through the session', { timeout: 60_000 }, () => {
  before(() => initSignatureVerifier());

  it('an author whose first write was credited, writing past its limit with its takes landed between writes, stores exactly its limit', async () => {
    const config = configs.find((c) => c.leases)!;
    const world = new World({
      ...config,
      relayKeepsOnReReq: false,
      relayAnswersAuth: false,
      relayTrustsKnownIds: false,
    });
    const write = async (event: Event) => {
      await world.client(['EVENT', event]);
      world.relay.answer(Number.MAX_SAFE_INTEGER, true);
      await world.deliver(Number.MAX_SAFE_INTEGER);
      await sleep(CREDIT_LANDS_MS);
    };
    // Another author first: the first take of a window length teaches credit that length.
    await write(genuine[PER_KEY]!);
    const decider = world.decider as LeasedAuthors;
    const creditedBefore = decider.points.credited;
    for (let n = 0; n < PER_KEY; n++) await write(genuine[n]!);
    assert.ok(decider.points.credited > creditedBefore, 'its first write was credited');
    const stored = world.relay.storedFresh.filter((e) => e.pubkey === pubkeys[0]).length;
    assert.equal(stored, LIMIT, 'stored: exactly the limit');
    const refused = world.clientGot.filter((m) => m[0] === 'OK' && m[2] === false);
    assert.equal(refused.length, PER_KEY - LIMIT, 'the rest refused');
    assert.ok(
      refused.every((m) => String(m[3]).startsWith('rate-limited:')),
      'by quota',
    );
    await world.upstreamGone();
    world.checkAlways();
    world.checkSettled();
    await decider.close();
  });
});

describe('the Nostr session over generated interleavings', { timeout: 240_000 }, () => {
  // The gateway's verifier as it serves (nostr-wasm), not the pure-JS fallback, many times dearer.
  before(() => initSignatureVerifier());

  for (const base of configs) {
    it(`keeps its invariants: ${base.name}`, { timeout: 120_000 }, async () => {
      await assertShowingCause(
        fc.asyncProperty(
          fc.commands(commands, { maxCommands: 60, size: 'large' }),
          fc.boolean(),
          fc.boolean(),
          fc.boolean(),
          async (cmds, relayKeepsOnReReq, relayAnswersAuth, relayTrustsKnownIds) => {
            const world = new World({
              ...base,
              relayKeepsOnReReq,
              relayAnswersAuth,
              relayTrustsKnownIds,
            });
            await world.deliver(1); // the relay's AUTH challenge, when it sends one
            await fc.asyncModelRun(() => ({ model: {}, real: world }), cmds);
            // Settle: the relay answers what it holds, its messages arrive, its socket closes.
            world.decider.setFailing(false);
            world.under.kv.failing = false;
            while (world.upstreamOpen && world.relay.pendingEvents.length > 0) {
              world.relay.answer(0, true);
            }
            await world.deliver(Number.MAX_SAFE_INTEGER);
            await world.upstreamGone();
            world.checkAlways();
            world.checkSettled();
            reached.stored += world.relay.storedFresh.length;
            if (world.decider instanceof LeasedAuthors) {
              reached.credited += world.decider.points.credited;
              reached.overcredited += world.decider.points.overcredited;
              for (const n of world.decider.insured.values()) reached.insured += n;
              await world.decider.close();
            }
          },
        ),
        { numRuns: 300 },
      );
      const expected: (keyof typeof reached)[] = ['stored', 'close-upstream'];
      if (base.verify === 'relay') expected.push('charge-author', 'pessimistic');
      else if (base.order.includes('pubkey')) expected.push('claim', 'refund-author');
      if (base.auth) expected.push('bound');
      if (base.leases) expected.push('credited', 'insured');
      if (base.challenge === 'gateway') expected.push('withhold');
      else if (base.auth) expected.push('unbind');
      for (const path of expected) {
        assert.ok(reached[path] > 0, `no run reached ${path}: ${JSON.stringify(reached)}`);
      }
    });
  }
});
