import { LRUCache } from 'lru-cache';
import type { Event } from 'nostr-tools/pure';
import type { QuotaDecision } from '../quota/decider.js';
import { NODE_BUDGET_POLICY } from '../quota/node-budget.js';
import { SHADOW_LOG_INTERVAL_MS, shadowed } from '../quota/shadow.js';
import { boundIdentityKeys, identityKeys } from '../quota/identity-keys.js';
import { Headroom } from '../quota/headroom.js';
import type { Receipt } from '../quota/consume.js';
import { pubkeyIdentity, resolveIdentity } from '../quota/policy.js';
import type { Identity } from '../quota/policy.js';
import {
  nostrRejection,
  quotaProblem,
  rateLimitHeaders,
  storeUnavailableProblem,
} from '../quota/responses.js';
import type { Problem } from '../quota/responses.js';
import { StoreError } from '../store/index.js';
import { IntervalSampler } from '../util/sampler.js';
import { WindowCounters } from '../util/window-counters.js';
import type { GatewayContext } from './context.js';

/** What the admission step reads from the gateway: built before it, so no cycle and no cast. */
export type AdmissionServices = Pick<
  GatewayContext,
  'config' | 'store' | 'policy' | 'decider' | 'pool' | 'metrics' | 'log' | 'admittedTally'
>;
import { NostrSession } from '../nostr/session.js';
import type { Forwarded, SessionAction, SessionSettings } from '../nostr/session.js';
import { EventPolicy } from '../nostr/event-policy.js';
import { newChallenge } from '../nostr/nip42.js';
import {
  eventIdMatches,
  parseClientFrame,
  parseEvent,
  sniffEventId,
  verifySignature,
} from '../nostr/frames.js';
import { parseRequestTarget } from './request-target.js';
import type { RequestTarget } from './request-target.js';
import type { UpstreamState } from './upstreams.js';

/** Who sends: the socket's address (after trusted proxies) and the API key it presented. */
export interface SenderFacts {
  ip: string;
  apiKey?: string;
}

export interface HttpFacts extends SenderFacts {
  method: string;
  url: string | undefined;
  /** Declared Content-Length; NaN or undefined when absent. */
  contentLength?: number;
  /** The body of a request on a path that takes one Nostr event (nostr.httpEventPaths). */
  eventBody?: Buffer;
}

export type HttpVerdict =
  | {
      action: 'forward';
      node: UpstreamState;
      target: RequestTarget;
      /** RateLimit headers to add to the relay's answer. */
      headers: Record<string, string>;
      /**
       * An HTTP event whose author was charged: call with the relay's answer (its status, and
       * whether its body says `duplicate:`). A 2xx claims the id; a 4xx or a duplicate gives
       * the author its points back (the relay stored nothing new).
       */
      onRelayAnswer?: (answer: RelayAnswer) => void;
    }
  | { action: 'answer'; problem: Problem; headers: Record<string, string> };

/** What the relay answered an HTTP event: its status, and whether it had the event already. */
export interface RelayAnswer {
  status: number;
  duplicate: boolean;
}

/** One client WebSocket: who it is (fixed at connect) and its Nostr session. */
export interface ConnectionFacts {
  ip: string;
  apiKey?: string;
  nodeId: string;
  /** Its protocol state: the bound AUTH pubkey, subscriptions, events awaiting the relay. */
  session: NostrSession;
}

export interface FrameVerdict {
  /** Forward the frame to the relay as received. */
  forward: boolean;
  /** A message the gateway answers itself (OK, CLOSED or NOTICE). */
  reply?: unknown[];
  /** Close the client with this code after the reply. */
  close?: { code: number; reason: string };
}

const FORWARD: FrameVerdict = { forward: true };

/** Where a charge is made: the client's address and its relay node. */
type Where = Pick<ConnectionFacts, 'ip' | 'nodeId'>;

/**
 * Events per connection awaiting the relay's OK (to charge their author or claim their id),
 * and their frame bytes: past either, EVENTs are refused until the relay answers. Entries
 * leave only by the relay's answer or the relay socket's close, never uncharged.
 */
const MAX_AWAITING_OK = 1024;
const MAX_AWAITING_BYTES = 4 * 1024 * 1024;

/** The window of failed verifications per address that ends the lift (see `liftable`). */
const FAILED_CHECKS_WINDOW_MS = 60_000;

/**
 * How far ahead of the gateway's clock a lifted event may be dated, and how much longer than
 * its author's window a claim on an event dated ahead is kept: a lifted replay (dated within
 * the window) always meets the claim of its first acceptance.
 */
const LIFT_AHEAD_SEC = 60;

function problemOf(status: number, type: string, title: string, detail: string): Problem {
  return { type: `urn:sluice:problem:${type}`, title, status, detail };
}

/**
 * The one admission step for HTTP requests and WebSocket frames: the proxies hand it the
 * facts and get a verdict; identity, cost, quota decisions and their metrics live here.
 *
 * Checks run from cheapest to dearest, and work is charged before it is done: the frame
 * rate of the source address (memory), parsing with size bounds, the sender's quota (the API
 * key it presented, else its address), then the author's quota, and last, while the node is
 * under pressure, the node's write budget, once per write. An author far from its limit is
 * charged on the event's hash alone (the relay verifies every event anyway; a refusal gives
 * the charge back, see `hashedEvent`); near it, or unknown, the signature is verified first
 * and a replay answered `duplicate:` without charging it.
 */
export class Admission {
  /** Frames per source address in the current second, for the most recent addresses. */
  private readonly frameRate: WindowCounters;
  /** Events per address that were verified before charging it (a lift) and failed, per minute. */
  private readonly failedChecks: WindowCounters;
  /** Shadow-mode refusals reach the log at most once a second, each line with its count. */
  private readonly shadowLog = new IntervalSampler(SHADOW_LOG_INTERVAL_MS);
  /** Kinds, work and costs, compiled once (nostr settings are not reloaded). */
  readonly eventPolicy: EventPolicy;
  /** What each author's last charge showed of its quota: how its next event is judged. */
  private readonly headroom: Headroom;
  /**
   * Ids this process saw a relay accept, for as long as their claim in Valkey lasts: a replay
   * through this process is answered `duplicate:` from memory, on either path.
   */
  private readonly accepted: LRUCache<string, true>;

  constructor(private readonly ctx: AdmissionServices) {
    const { maxTrackedClients } = ctx.config.limits;
    this.frameRate = new WindowCounters(maxTrackedClients);
    this.failedChecks = new WindowCounters(maxTrackedClients);
    this.eventPolicy = new EventPolicy(ctx.config.nostr);
    this.headroom = new Headroom(maxTrackedClients);
    this.accepted = new LRUCache<string, true>({ max: maxTrackedClients, ttlAutopurge: false });
    boundIdentityKeys(maxTrackedClients);
    ctx.metrics.countTrackedClients(() => ({
      'identity-keys': identityKeys().size,
      'frame-rate': this.frameRate.size,
      'failed-checks': this.failedChecks.size,
      'author-headroom': this.headroom.size,
      'accepted-ids': this.accepted.size,
      ...ctx.decider.trackedClients(),
    }));
  }

  /**
   * The identity charged for every write a client sends, whatever it carries: its API key,
   * else its address (an authenticated pubkey is charged besides it: see `senders`).
   */
  sender(facts: SenderFacts): Identity {
    const { order, keySalt } = this.ctx.config.identity;
    const senderOrder = order.filter((s) => s !== 'pubkey' && s !== 'auth');
    return resolveIdentity(facts, senderOrder, this.ctx.policy, keySalt);
  }

  async http(facts: HttpFacts): Promise<HttpVerdict> {
    const { ctx } = this;
    const target = parseRequestTarget(facts.url);
    if (!target) {
      return answer(
        problemOf(400, 'bad-request-target', 'Bad Request', 'the request target is not usable'),
      );
    }
    const { cls, cost } = ctx.policy.classify(facts.method, target.path);
    if (cls === 'deny') {
      return answer(problemOf(404, 'not-found', 'Not Found', 'no such resource'));
    }
    const { maxBodyBytes } = ctx.config.limits;
    if ((facts.contentLength ?? 0) > maxBodyBytes) {
      return answer(
        problemOf(
          413,
          'body-too-large',
          'Content Too Large',
          `request bodies are limited to ${maxBodyBytes} bytes`,
        ),
      );
    }
    const identity = this.sender(facts);
    const node = ctx.pool.pick(identity.key);
    if (!node) {
      return answer(
        problemOf(503, 'no-relay', 'Service Unavailable', 'no relay node is available'),
        { 'retry-after': '1' },
      );
    }
    if (cls === 'exempt') return { action: 'forward', node, target, headers: {} };
    if (facts.eventBody !== undefined) return this.httpEvent(facts, facts.eventBody, node, target);
    const decided = await ctx.decider.decide({
      identity,
      ip: facts.ip,
      cls,
      cost,
      nodeId: node.id,
    });
    if (!decided) {
      if (cls === 'write') this.forwarded(node.id, facts.contentLength ?? 0, cost);
      return { action: 'forward', node, target, headers: {} };
    }
    const decision = this.judged(decided, identity, cls, node.id);
    // The node's budget only once the client's own cap admitted the write: the heaviest
    // writers are refused by their caps and never draw on what the node takes from everyone.
    const pending = decision.admitted
      ? this.nodeBudget(identity, facts.ip, cls, cost, node.id)
      : null;
    const nodeDecision = pending ? await pending : null;
    const headers = rateLimitHeaders(
      decision,
      ctx.config.quotas.headers,
      nodeDecision ?? undefined,
    );
    const refusal = decision.admitted ? nodeDecision : decision;
    if (!refusal || refusal.admitted) {
      if (cls === 'write') this.forwarded(node.id, facts.contentLength ?? 0, cost);
      return { action: 'forward', node, target, headers };
    }
    // A quota store failure in fail-closed mode is our problem, not the client's: 503, never 429.
    return refusal.outcome === 'error'
      ? answer(storeUnavailableProblem(), { 'retry-after': '1' })
      : answer(quotaProblem(refusal), headers);
  }

  /**
   * An event written over HTTP (POST to one of nostr.httpEventPaths): the same event policy
   * as a WebSocket EVENT (kinds, proof of work, costs), charged to the sender, then verified
   * and charged to its author unless some gateway saw the relay accept it; its id is claimed
   * once the relay accepts it (a 2xx).
   */
  private async httpEvent(
    facts: HttpFacts,
    body: Buffer,
    node: UpstreamState,
    target: RequestTarget,
  ): Promise<HttpVerdict> {
    const { ctx } = this;
    const invalid = (detail: string) =>
      answer(problemOf(400, 'invalid-event', 'Bad Request', `invalid: ${detail}`));
    let raw: unknown;
    try {
      raw = JSON.parse(body.toString('utf8'));
    } catch {
      return invalid('the body is not JSON');
    }
    const parsed = parseEvent(raw);
    if (parsed.type === 'BAD_EVENT') return invalid(parsed.reason);
    const { event } = parsed;
    const judged = this.eventPolicy.judge(event, body.length);
    if (judged.refused !== undefined) {
      ctx.metrics.frames.inc({ type: judged.metric });
      return answer(problemOf(403, 'event-refused', 'Forbidden', judged.refused));
    }
    const sender = this.sender(facts);
    const conn = { ip: facts.ip, nodeId: node.id };
    const { nostr, identity, quotas } = ctx.config;
    const charged = quotas.enabled && identity.order.includes('pubkey');
    const lifted = charged && this.liftable(facts, event);
    const charge = async (identity: Identity): Promise<QuotaDecision | undefined> => {
      if (judged.cost === 0) return undefined;
      const decided = await ctx.decider.decide({
        identity,
        ip: facts.ip,
        cls: 'write',
        cost: judged.cost,
        nodeId: node.id,
      });
      return decided ? this.judged(decided, identity, 'write', node.id) : undefined;
    };
    const refused = (decision: QuotaDecision): HttpVerdict =>
      decision.outcome === 'error'
        ? answer(storeUnavailableProblem(), { 'retry-after': '1' })
        : answer(quotaProblem(decision), rateLimitHeaders(decision, ctx.config.quotas.headers));
    // A lifted event is verified first, and the address pays only if it fails or is a replay.
    let senderDecision = lifted ? undefined : await charge(sender);
    if (senderDecision && !senderDecision.admitted) return refused(senderDecision);
    if (judged.forged || ((charged || nostr.verify === 'always') && !verifySignature(event))) {
      if (lifted) {
        this.failedChecks.consume(facts.ip, 1, FAILED_CHECKS_WINDOW_MS);
        await charge(sender);
      }
      return invalid(
        judged.forged
          ? 'event id does not match its content'
          : 'event id or signature does not verify',
      );
    }
    let onRelayAnswer: ((answer: RelayAnswer) => void) | undefined;
    let authorDecision: QuotaDecision | undefined;
    // A replay of an event a relay accepted is the relay's to answer (duplicate): its author
    // does not pay again, its sender does (a lifted one too).
    const replay = charged && (await this.seen(event.id)) === true;
    if (replay && lifted) {
      senderDecision = await charge(sender);
      if (senderDecision && !senderDecision.admitted) return refused(senderDecision);
    }
    if (charged && !replay) {
      const author = this.author(event.pubkey);
      authorDecision = await charge(author);
      if (authorDecision && !authorDecision.admitted) return refused(authorDecision);
      const receipt = authorDecision?.receipt;
      const claim = {
        type: 'claim',
        id: event.id,
        pubkey: event.pubkey,
        createdAt: event.created_at,
        shared: true,
      } as const;
      onRelayAnswer = ({ status, duplicate }) => {
        const stored = status >= 200 && status < 300;
        if (stored) this.act(conn, claim).catch(() => undefined);
        // Refused (4xx) or had already: nothing new stored. A 5xx may have stored it: kept.
        if (duplicate || (status >= 400 && status < 500)) {
          this.refund(author, conn, judged.cost, receipt).catch(() => undefined);
        }
      };
    }
    // The quota the answer's headers describe: the sender's, or a lifted event's author's.
    const shown = senderDecision ?? (lifted ? authorDecision : undefined);
    const pending =
      shown && judged.cost > 0
        ? this.nodeBudget(sender, facts.ip, 'write', judged.cost, node.id)
        : null;
    const nodeDecision = pending ? await pending : null;
    const headers = shown
      ? rateLimitHeaders(shown, ctx.config.quotas.headers, nodeDecision ?? undefined)
      : {};
    if (nodeDecision && !nodeDecision.admitted) {
      return nodeDecision.outcome === 'error'
        ? answer(storeUnavailableProblem(), { 'retry-after': '1' })
        : answer(quotaProblem(nodeDecision), headers);
    }
    this.forwarded(node.id, body.length, judged.cost);
    return { action: 'forward', node, target, headers, onRelayAnswer };
  }

  async frame(conn: ConnectionFacts, data: Buffer, isBinary: boolean): Promise<FrameVerdict> {
    const { ctx } = this;
    const { maxFrameBytes } = ctx.config.limits;
    if (!(await this.withinFrameRate(conn.ip))) {
      ctx.metrics.frames.inc({ type: 'RATE_LIMITED' });
      return {
        forward: false,
        reply: refusal(data, 'rate-limited: too many messages from this address'),
      };
    }
    if (isBinary) {
      ctx.metrics.frames.inc({ type: 'MALFORMED' });
      return { forward: false, reply: ['NOTICE', 'invalid: binary frames are not part of NIP-01'] };
    }
    if (data.length > maxFrameBytes) {
      ctx.metrics.frames.inc({ type: 'OVERSIZED' });
      const reason = `invalid: message of ${data.length} bytes exceeds the limit of ${maxFrameBytes} bytes`;
      return { forward: false, reply: refusal(data, reason) };
    }
    const frame = parseClientFrame(data.toString('utf8'));
    ctx.metrics.frames.inc({ type: frame.type === 'BAD_EVENT' ? 'EVENT' : frame.type });
    const { session } = conn;
    switch (frame.type) {
      case 'MALFORMED':
        return { forward: false, reply: ['NOTICE', `invalid: ${frame.reason}`] };
      case 'BAD_EVENT':
        return { forward: false, reply: ['OK', frame.id, false, `invalid: ${frame.reason}`] };
      case 'EVENT':
        return this.event(conn, frame.event, data.length);
      case 'REQ':
      case 'COUNT': {
        const restricted = session.reqRefusal(frame.type, frame.subId, frame.filters);
        if (restricted !== undefined) ctx.metrics.frames.inc({ type: 'RESTRICTED' });
        const refused = restricted ?? (await this.chargeSenders(conn, 'read', 1));
        if (refused !== undefined) {
          return { forward: false, reply: ['CLOSED', frame.subId, refused] };
        }
        if (frame.type === 'REQ') session.reqForwarded(frame.subId);
        return FORWARD;
      }
      case 'CLOSE':
        if (frame.subId !== undefined) session.closeForwarded(frame.subId);
        return FORWARD;
      case 'AUTH':
        return ctx.config.nostr.publicUrl !== undefined
          ? this.authFrame(conn, frame.event)
          : FORWARD;
      default:
        return FORWARD;
    }
  }

  /** A fresh Nostr session for a client connection, under this gateway's settings. */
  newSession(): NostrSession {
    const issued = this.ctx.config.nostr.auth.challenge === 'gateway' ? newChallenge() : undefined;
    return new NostrSession(this.sessionSettings(), verifySignature, issued);
  }

  /** What a session needs of the configuration (nostr settings are not reloaded). */
  sessionSettings(): SessionSettings {
    const { nostr, identity, quotas, limits } = this.ctx.config;
    const charged = quotas.enabled && identity.order.includes('pubkey');
    return {
      author: !charged ? 'off' : nostr.verify === 'relay' ? 'relay' : 'gateway',
      publicUrl: nostr.publicUrl,
      maxSubscriptions: nostr.maxSubscriptions,
      maxFiltersPerReq: nostr.maxFiltersPerReq,
      maxInvalidEvents: nostr.maxInvalidEvents,
      maxAwaiting: MAX_AWAITING_OK,
      maxAwaitingBytes: Math.max(MAX_AWAITING_BYTES, 2 * limits.maxFrameBytes),
    };
  }

  /**
   * Do what a session asks after a relay message or the relay socket's close: charge an
   * author, claim an id. Frames to the relay are the caller's (it holds the socket).
   */
  async act(conn: Where, action: SessionAction): Promise<void> {
    const { ctx } = this;
    switch (action.type) {
      case 'charge-author':
        await this.charge(this.author(action.pubkey), conn, 'write', action.cost);
        return;
      case 'refund-author':
        await this.refund(this.author(action.pubkey), conn, action.cost, action.receipt);
        return;
      case 'invalid':
        ctx.metrics.frames.inc({ type: 'INVALID_SIGNATURE' });
        return;
      case 'charge-sender':
        // Only lifted events ask this, and only an address is lifted.
        await this.charge(this.sender({ ip: conn.ip }), conn, 'write', action.cost);
        return;
      case 'claim': {
        const windowSec = ctx.policy.limitOf(this.author(action.pubkey).tier, 'write')?.windowSec;
        if (!windowSec) return;
        const ms = this.claimMs(windowSec, action.createdAt);
        this.accepted.set(action.id, true, { ttl: ms });
        if (!action.shared || ctx.decider.storeDown) return;
        try {
          await ctx.store.kv.claim(seenKey(ctx, action.id), '1', ms);
        } catch (err) {
          // Without the mark, a replay is judged as new (and its author charged again).
          if (!(err instanceof StoreError)) throw err;
        }
        return;
      }
      case 'unbind':
        ctx.metrics.frames.inc({ type: 'AUTH_REFUSED' });
        return;
      default:
        return;
    }
  }

  /**
   * An EVENT of `bytes` bytes (the message as received): refused outright by the event policy
   * (kind, proof of work) or this connection's state, else charged its cost to every sender
   * identity, then to its author (see NostrSession for when).
   */
  private async event(conn: ConnectionFacts, event: Event, bytes: number): Promise<FrameVerdict> {
    const { ctx } = this;
    const { nostr } = ctx.config;
    const { session } = conn;
    const notOk = (message: string): FrameVerdict => ({
      forward: false,
      reply: ['OK', event.id, false, message],
    });
    const judged = this.eventPolicy.judge(event, bytes);
    if (judged.refused !== undefined) {
      ctx.metrics.frames.inc({ type: judged.metric });
      return notOk(judged.refused);
    }
    if (nostr.authRequiredForWrites && session.authPubkey === undefined) {
      ctx.metrics.frames.inc({ type: 'AUTH_REQUIRED' });
      return notOk('auth-required: authenticate (NIP-42 AUTH) before writing to this relay');
    }
    const held = session.eventRefusal(event.id, bytes);
    if (held !== undefined) return notOk(held);
    const { cost } = judged;
    const mode = session.settings.author;
    if (mode !== 'off' && this.liftable(conn, event)) {
      return this.liftedEvent(conn, event, judged.forged, cost, bytes);
    }
    // An author with room, of an event whose id is its content's hash: see hashedEvent.
    const author = mode === 'gateway' ? this.author(event.pubkey) : undefined;
    if (
      author &&
      !judged.forged &&
      this.onHash(author, cost) &&
      (judged.hashed || eventIdMatches(event))
    ) {
      return this.hashedEvent(conn, event, author, cost, bytes);
    }
    const refusedSender = await this.chargeSenders(conn, 'write', cost);
    const withinBudget = () => this.forwardWithinBudget(conn, event, cost, bytes, {});
    if (judged.forged) {
      return this.doesNotVerify(conn, notOk('invalid: event id does not match its content'));
    }
    if (refusedSender !== undefined) return notOk(refusedSender);
    if (mode === 'relay') {
      // The relay checks the signature; the gateway hashes, so the pubkey the relay's OK
      // proves is the one in this frame (a twin with this id and another pubkey is a forgery).
      if (!judged.hashed && !eventIdMatches(event)) {
        return this.doesNotVerify(conn, notOk('invalid: event id does not match its content'));
      }
      const refusedAuthor = this.authorKnownOverLimit(conn, this.author(event.pubkey));
      if (refusedAuthor !== undefined) return notOk(refusedAuthor);
      return withinBudget();
    }
    if (mode === 'off' && nostr.verify !== 'always') return withinBudget();
    // An author this process knows is over its limit is refused before its signature is
    // checked: nothing of its can be stored this window, and the refusal needs no proof (a
    // replay is still answered duplicate:). Its sender paid for the frame above.
    const over = author && this.authorKnownOverLimit(conn, author);
    if (over) {
      return (await this.seen(event.id)) === true ? duplicateOf(event.id, ctx) : notOk(over);
    }
    if (!verifySignature(event)) {
      return this.doesNotVerify(conn, notOk('invalid: event id or signature does not verify'));
    }
    if (mode === 'off') return withinBudget();
    if ((await this.seen(event.id)) === true) return duplicateOf(event.id, ctx);
    if (!author) return withinBudget();
    const decision = await this.chargeDecision(author, conn, 'write', cost);
    this.headroom.learn(author.key, decision);
    if (decision && !decision.admitted) return notOk(nostrRejection(decision));
    return this.forwardWithinBudget(conn, event, cost, bytes, {
      receipt: decision?.receipt,
      author,
    });
  }

  /**
   * Whether an EVENT (of `bytes`, sent by an address) would now be charged to its author on its
   * hash alone, unverified (see hashedEvent); for tests that follow each path.
   */
  judgedOnHash(event: Event, bytes: number): boolean {
    const judged = this.eventPolicy.judge(event, bytes);
    if (judged.refused !== undefined || this.sessionSettings().author !== 'gateway') return false;
    return this.onHash(this.author(event.pubkey), judged.cost);
  }

  /** nostr.verify auto, and the author had room to spare at its last charge. */
  private onHash(author: Identity, cost: number): boolean {
    return this.ctx.config.nostr.verify === 'auto' && this.headroom.roomFor(author.key, cost);
  }

  /**
   * An EVENT whose author had room to spare at its last charge (see Headroom): hashed, not
   * verified, and its author charged before it is forwarded, as exactly as a verified one (no
   * event goes to the relay unpaid). The relay verifies it; its refusal (`invalid:` among
   * them) or `duplicate:` gives the author its points back, and an `invalid:` that the
   * gateway's own check confirms counts against the connection (see NostrSession). A charge
   * refused here is judged as a verified one would be before it stands: a forgery, or a
   * replay of a stored event, is given back.
   */
  private async hashedEvent(
    conn: ConnectionFacts,
    event: Event,
    author: Identity,
    cost: number,
    bytes: number,
  ): Promise<FrameVerdict> {
    const notOk = (message: string): FrameVerdict => ({
      forward: false,
      reply: ['OK', event.id, false, message],
    });
    // A replay of what a relay accepted through this process: answered here, its author spared.
    if (this.accepted.has(event.id)) {
      const refused = await this.chargeSenders(conn, 'write', cost);
      return refused === undefined ? duplicateOf(event.id, this.ctx) : notOk(refused);
    }
    // Sender and author in one turn (their commands leave in one write): a refused sender
    // gives the author's charge back, as if it had never been asked.
    const [refusedSender, decision] = await Promise.all([
      this.chargeSenders(conn, 'write', cost),
      this.chargeDecision(author, conn, 'write', cost),
    ]);
    this.headroom.learn(author.key, decision);
    if (refusedSender !== undefined) {
      await this.refund(author, conn, cost, decision?.receipt);
      return notOk(refusedSender);
    }
    if (decision && !decision.admitted) {
      const forged = !verifySignature(event);
      if (forged || (await this.seen(event.id)) === true) {
        await this.refund(author, conn, cost, decision.receipt);
        return forged
          ? this.doesNotVerify(conn, notOk('invalid: event id or signature does not verify'))
          : duplicateOf(event.id, this.ctx);
      }
      return notOk(nostrRejection(decision));
    }
    return this.forwardWithinBudget(conn, event, cost, bytes, {
      receipt: decision?.receipt,
      unverified: true,
      author,
    });
  }

  /**
   * An EVENT whose author is listed in a tier that lifts the address (see `liftable`): its
   * signature is checked before anything is charged, so the address is spared only for a
   * signature of that key. One that fails verification is charged to the senders after the
   * fact and counted (the connection closes at nostr.maxInvalidEvents); a replay (marked
   * seen, or answered `duplicate:` by the relay) is charged to the senders too; the rest
   * pays the author's tier and any sender that is not the address (an AUTH pubkey).
   */
  private async liftedEvent(
    conn: ConnectionFacts,
    event: Event,
    forged: boolean,
    cost: number,
    bytes: number,
  ): Promise<FrameVerdict> {
    const { ctx } = this;
    const mode = conn.session.settings.author;
    const notOk = (message: string): FrameVerdict => ({
      forward: false,
      reply: ['OK', event.id, false, message],
    });
    if (forged || !verifySignature(event)) {
      this.failedChecks.consume(conn.ip, 1, FAILED_CHECKS_WINDOW_MS);
      await this.chargeSenders(conn, 'write', cost);
      return this.doesNotVerify(conn, notOk('invalid: event id or signature does not verify'));
    }
    if (mode === 'gateway' && (await this.seen(event.id)) === true) {
      const refused = await this.chargeSenders(conn, 'write', cost);
      if (refused !== undefined) return notOk(refused);
      return duplicateOf(event.id, ctx);
    }
    const others = this.senders(conn).filter((identity) => identity.source !== 'ip');
    const refusedSender = await this.chargeEach(others, conn, 'write', cost);
    if (refusedSender !== undefined) return notOk(refusedSender);
    if (mode === 'relay') {
      const refusedAuthor = this.authorKnownOverLimit(conn, this.author(event.pubkey));
      if (refusedAuthor !== undefined) return notOk(refusedAuthor);
      return this.forwardWithinBudget(conn, event, cost, bytes, { lifted: true });
    }
    // The author's receipt goes with it: a replay the relay answers `duplicate:` (one no
    // gateway claimed) is given back to the author, and charged to the address.
    const author = this.author(event.pubkey);
    const decision = await this.chargeDecision(author, conn, 'write', cost);
    if (decision && !decision.admitted) return notOk(nostrRejection(decision));
    return this.forwardWithinBudget(conn, event, cost, bytes, {
      lifted: true,
      receipt: decision?.receipt,
      author,
    });
  }

  /**
   * Last, once every per-client charge admitted the event: the node's write budget, then the
   * event is forwarded (how: see NostrSession.eventForwarded). A refusal by the budget gives
   * the author's charge back (`how.author`): the event was not written.
   */
  private async forwardWithinBudget(
    conn: ConnectionFacts,
    event: Event,
    cost: number,
    bytes: number,
    how: Forwarded & { author?: Identity },
  ): Promise<FrameVerdict> {
    const refused = await this.nodeBudgetRefusal(this.sender(conn), conn, cost);
    if (refused !== undefined) {
      if (how.author) await this.refund(how.author, conn, cost, how.receipt);
      return { forward: false, reply: ['OK', event.id, false, refused] };
    }
    conn.session.eventForwarded(event, cost, bytes, how);
    this.forwarded(conn.nodeId, bytes, cost);
    return FORWARD;
  }

  /**
   * Whether an EVENT may go in without charging the address, decided before anything is
   * charged: its pubkey is listed in a tier with chargeAddress false (one Map lookup); it is
   * dated within its author's write window (and at most LIFT_AHEAD_SEC ahead), so that a
   * replay of it meets the claim its first acceptance left (older events pay the address as
   * any); the sender is the address (an API key is charged as ever); and fewer than
   * nostr.maxInvalidEvents such events from this address failed verification this minute
   * (past that, its events pay the address first, as any: verifying is work, and unpaid).
   */
  private liftable(facts: SenderFacts, event: Event): boolean {
    const { policy, config } = this.ctx;
    if (!policy.liftsAddress(event.pubkey)) return false;
    const windowSec = policy.limitOf(this.author(event.pubkey).tier, 'write')?.windowSec ?? 0;
    const age = Math.floor(Date.now() / 1000) - event.created_at;
    return (
      age <= windowSec &&
      age >= -LIFT_AHEAD_SEC &&
      this.sender(facts).source === 'ip' &&
      this.failedChecks.peek(facts.ip) < config.nostr.maxInvalidEvents
    );
  }

  /**
   * How long a claim on an accepted event lasts: its author's window, and as much longer as
   * the event is dated ahead (at most LIFT_AHEAD_SEC), so that it covers every replay dated
   * within the window of now.
   */
  private claimMs(windowSec: number, createdAt: number): number {
    const ahead = Math.min(Math.max(createdAt - Math.floor(Date.now() / 1000), 0), LIFT_AHEAD_SEC);
    return (windowSec + ahead) * 1000;
  }

  /**
   * A client's AUTH event, checked by the gateway before the relay sees it (see
   * NostrSession.auth): bound when it passes, and forwarded (or, under the gateway's own
   * challenge, answered OK true here); answered OK false here otherwise.
   */
  private authFrame(conn: ConnectionFacts, raw: unknown): FrameVerdict {
    const parsed = parseEvent(raw);
    if (parsed.type === 'BAD_EVENT') {
      return { forward: false, reply: ['OK', parsed.id, false, `invalid: ${parsed.reason}`] };
    }
    const verdict = conn.session.auth(parsed.event, Math.floor(Date.now() / 1000));
    if (verdict.bound !== undefined) return { forward: verdict.forward, reply: verdict.reply };
    this.ctx.metrics.frames.inc({ type: 'AUTH_REFUSED' });
    const refused: FrameVerdict = { forward: false, reply: verdict.reply };
    return verdict.invalidSignature ? this.doesNotVerify(conn, refused) : refused;
  }

  /** An EVENT whose id or signature is false: counted, and past the bound the connection closes. */
  private doesNotVerify(conn: ConnectionFacts, verdict: FrameVerdict): FrameVerdict {
    this.ctx.metrics.frames.inc({ type: 'INVALID_SIGNATURE' });
    if (!conn.session.invalid()) return verdict;
    return { ...verdict, close: { code: 1008, reason: 'too many events that do not verify' } };
  }

  /**
   * What this process already knows of the author, without charging or asking Valkey: its
   * in-memory block, set by an earlier charge that reached the limit. Under nostr.verify
   * relay, the only refusal before the relay's OK; under gateway, one before the signature
   * is checked.
   */
  private authorKnownOverLimit(conn: ConnectionFacts, author: Identity): string | undefined {
    const known = this.ctx.decider.knownOverLimit({
      identity: author,
      cls: 'write',
      nodeId: conn.nodeId,
    });
    if (!known) return undefined;
    const judged = this.judged(known, author, 'write', conn.nodeId);
    return judged.admitted ? undefined : nostrRejection(judged);
  }

  /** A verified author, in the tier identity.pubkeyTiers lists it in (else the default). */
  private author(pubkey: string): Identity {
    return pubkeyIdentity('pubkey', pubkey, this.ctx.policy, this.ctx.config.identity.keySalt);
  }

  /**
   * Whether some gateway marked this event id seen within its author's window (the relay
   * accepted it): a replay is answered `duplicate:` without charging its author. Without the
   * store it is judged as new (the insurance limiter still bounds the author).
   */
  private async seen(id: string): Promise<boolean | 'unknown'> {
    const { ctx } = this;
    if (!ctx.config.quotas.enabled) return 'unknown';
    if (this.accepted.has(id)) return true;
    if (ctx.decider.storeDown) return 'unknown';
    try {
      return (await ctx.store.kv.get(seenKey(ctx, id))) !== null;
    } catch (err) {
      if (err instanceof StoreError) return 'unknown';
      throw err;
    }
  }

  /** Charge every identity that sends on this connection (see `senders`). */
  private chargeSenders(
    conn: ConnectionFacts,
    cls: 'write' | 'read',
    cost: number,
  ): Promise<string | undefined> {
    return this.chargeEach(this.senders(conn), conn, cls, cost);
  }

  /** Charge each identity in turn; the first refusal stops. */
  private async chargeEach(
    identities: Identity[],
    conn: Where,
    cls: 'write' | 'read',
    cost: number,
  ): Promise<string | undefined> {
    for (const identity of identities) {
      const refused = await this.charge(identity, conn, cls, cost);
      if (refused !== undefined) return refused;
    }
    return undefined;
  }

  /**
   * The identities charged for each write and read of a connection, in charge order: its
   * API key or address, and the pubkey it authenticated as (`auth` in identity.order, in
   * the tier identity.pubkeyTiers lists it in), which adds a charge and never replaces the
   * address's (a key costs nothing to mint), unless its tier lifts the address
   * (chargeAddress false: the operator listed the key, and the gateway checked its AUTH).
   */
  senders(conn: ConnectionFacts): Identity[] {
    const { policy, config } = this.ctx;
    const { order, keySalt } = config.identity;
    const base = this.sender(conn);
    const pubkey = conn.session.authPubkey;
    if (pubkey === undefined || !order.includes('auth')) return [base];
    const auth = pubkeyIdentity('auth', pubkey, policy, keySalt);
    return base.source === 'ip' && policy.liftsAddress(pubkey) ? [auth] : [base, auth];
  }

  /**
   * Undefined when admitted, else the NIP-01 message of the refusal. A cost of 0 (a kind the
   * operator made free) admits without consuming: no Valkey round trip.
   */
  private async charge(
    identity: Identity,
    conn: Where,
    cls: 'write' | 'read',
    cost: number,
  ): Promise<string | undefined> {
    const decision = await this.chargeDecision(identity, conn, cls, cost);
    return !decision || decision.admitted ? undefined : nostrRejection(decision);
  }

  /** The charge's decision as the identity's tier applies it; null when nothing was charged. */
  private async chargeDecision(
    identity: Identity,
    conn: Where,
    cls: 'write' | 'read',
    cost: number,
  ): Promise<QuotaDecision | null> {
    if (cost === 0) return null;
    const decided = await this.ctx.decider.decide({
      identity,
      ip: conn.ip,
      cls,
      cost,
      nodeId: conn.nodeId,
    });
    return decided && this.judged(decided, identity, cls, conn.nodeId);
  }

  /** Give back a write charge whose write was not done (best effort: see QuotaDecider.refund). */
  private async refund(
    identity: Identity,
    conn: Where,
    cost: number,
    receipt: Receipt | undefined,
  ): Promise<void> {
    if (!receipt) return;
    const req = { identity, ip: conn.ip, cls: 'write' as const, cost, nodeId: conn.nodeId };
    await this.ctx.decider.refund(req, receipt);
  }

  /**
   * A write admitted by its per-client caps, charged to its node's write budget (see
   * QuotaDecider.decideNode), judged under the sender's tier: null when nothing was charged.
   */
  private nodeBudget(
    sender: Identity,
    ip: string,
    cls: 'write' | 'read',
    cost: number,
    nodeId: string,
  ): Promise<QuotaDecision | null> | null {
    // Checked synchronously: at m = 1 (the common case) a write costs no promise here.
    if (cls !== 'write' || !this.ctx.decider.chargesNode(nodeId)) return null;
    return this.ctx.decider
      .decideNode({ identity: sender, ip, cls, cost, nodeId })
      .then((decided) => decided && this.judged(decided, sender, cls, nodeId));
  }

  /**
   * A write on its way to the node: counted for its feed to learn what the node drains
   * (pressure/budget/admitted-tally.ts: in memory here, batched to Valkey), pressure on only.
   */
  private forwarded(nodeId: string, bytes: number, cost: number): void {
    this.ctx.admittedTally?.note(nodeId, bytes, cost);
  }

  /** Undefined when the node's budget admits the write, else the NIP-01 message. */
  private async nodeBudgetRefusal(
    sender: Identity,
    conn: Where,
    cost: number,
  ): Promise<string | undefined> {
    const pending =
      cost === 0 ? null : this.nodeBudget(sender, conn.ip, 'write', cost, conn.nodeId);
    const d = pending ? await pending : null;
    return !d || d.admitted ? undefined : nostrRejection(d);
  }

  /**
   * The decision as the identity's tier applies it (a refusal under shadow mode admits,
   * marked shadow_limited), counted (a node budget's on its own counter), and in shadow mode
   * sampled to the log.
   */
  private judged(
    decision: QuotaDecision,
    identity: Identity,
    cls: 'write' | 'read',
    nodeId: string,
  ): QuotaDecision {
    const { ctx } = this;
    const judged =
      decision.admitted || ctx.policy.modeOf(identity.tier) === 'enforce'
        ? decision
        : shadowed(decision);
    if (judged.policy === NODE_BUDGET_POLICY) ctx.metrics.countNodeBudget(judged.outcome, nodeId);
    else ctx.metrics.countDecision(judged.outcome, cls, nodeId);
    if (judged.outcome === 'shadow_limited') {
      const count = this.shadowLog.take();
      if (count > 0) {
        // The identity's hash, never the identity: logs are read by many.
        ctx.log.info(
          {
            identity: identity.source,
            key: identity.key,
            tier: identity.tier,
            class: cls,
            node: nodeId,
            policy: judged.policy,
            limit: judged.limit,
            windowSec: judged.windowSec,
            shadowLimited: count,
          },
          `shadow mode: would have refused (${count} since the last line)`,
        );
      }
    }
    return judged;
  }

  private withinFrameRate(ip: string): Promise<boolean> {
    const { consumed } = this.frameRate.consume(ip, 1, 1000);
    return Promise.resolve(consumed <= this.ctx.config.limits.framesPerSecPerAddress);
  }
}

/**
 * Whether the gateway verifies an EVENT itself (~0.25 ms of CPU): only where the author is
 * charged (the pubkey identity with quotas on), or when asked for every event.
 */
export function verifies(
  mode: GatewayContext['config']['nostr']['verify'],
  order: readonly string[],
  quotasEnabled: boolean,
): boolean {
  return mode === 'always' || (mode === 'auto' && quotasEnabled && order.includes('pubkey'));
}

/** The gateway's own answer to a replay of an event some relay accepted. */
function duplicateOf(id: string, ctx: AdmissionServices): FrameVerdict {
  ctx.metrics.frames.inc({ type: 'DUPLICATE' });
  return { forward: false, reply: ['OK', id, true, 'duplicate: already have this event'] };
}

function answer(problem: Problem, headers: Record<string, string> = {}): HttpVerdict {
  return { action: 'answer', problem, headers };
}

/** OK false for an EVENT whose id can be found without parsing, NOTICE otherwise. */
function refusal(data: Buffer, reason: string): unknown[] {
  const id = sniffEventId(data.toString('utf8', 0, Math.min(data.length, 64 * 1024)));
  return id ? ['OK', id, false, reason] : ['NOTICE', reason];
}

/** Event ids are hashes of verified content: their own hash tag spreads them over slots. */
function seenKey(ctx: AdmissionServices, id: string): string {
  return `${ctx.config.quotas.keyPrefix}:seen:{${id}}`;
}
