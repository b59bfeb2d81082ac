import type { Event } from 'nostr-tools/pure';
import type { QuotaDecision } from '../quota/decider.js';
import { NODE_BUDGET_POLICY } from '../quota/node-budget.js';
import { SHADOW_LOG_INTERVAL_MS, shadowed } from '../quota/shadow.js';
import { boundIdentityKeys, identityKeys } from '../quota/identity-keys.js';
import { makeIdentity, resolveIdentity } from '../quota/policy.js';
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
import { recordDecision } from './context.js';
import { authEventProblem } from '../nostr/nip42.js';
import { MAX_AUTH_ATTEMPTS } from './connection-auth.js';
import type { ConnectionAuth } from './connection-auth.js';
import { compileCosts, eventCost, kindMatcher } from './nostr-costs.js';
import type { CostTable } from './nostr-costs.js';
import {
  eventIdMatches,
  parseClientFrame,
  parseEvent,
  sniffEventId,
  verifySignature,
} from './nostr-frames.js';
import { discountedCost, workDone } from './nostr-pow.js';
import { parseRequestTarget } from './request-target.js';
import type { RequestTarget } from './request-target.js';
import type { UpstreamState } from './upstreams.js';

/**
 * Who sends: the socket's address (after trusted proxies), the API key it presented and, on
 * a WebSocket, the pubkey it authenticated as (NIP-42).
 */
export interface SenderFacts {
  ip: string;
  apiKey?: string;
  authPubkey?: string;
}

export interface HttpFacts extends SenderFacts {
  method: string;
  url: string | undefined;
  /** Declared Content-Length; NaN or undefined when absent. */
  contentLength?: number;
}

export type HttpVerdict =
  | {
      action: 'forward';
      node: UpstreamState;
      target: RequestTarget;
      /** RateLimit headers to add to the relay's answer. */
      headers: Record<string, string>;
    }
  | { action: 'answer'; problem: Problem; headers: Record<string, string> };

/** One client WebSocket: fixed at connect, plus what its frames have cost so far. */
export interface ConnectionFacts extends SenderFacts {
  nodeId: string;
  /** EVENTs that failed verification on this connection. */
  invalidEvents: number;
  /**
   * Subscription ids open on this connection, tracked only under nostr.maxSubscriptions (so
   * bounded by it: ids are at most 64 characters).
   */
  subscriptions?: Set<string>;
  /** NIP-42 followed by the gateway (nostr.publicUrl set); binds `authPubkey`. */
  auth?: ConnectionAuth;
}

export interface FrameVerdict {
  /** Forward the frame to the relay as received. */
  forward: boolean;
  /** A message the gateway answers itself (OK, CLOSED or NOTICE). */
  reply?: unknown[];
  /** Close the client with this code after the reply. */
  close?: { code: number; reason: string };
  /** nostr.verify relay: charge this author once the relay accepts the event with this id. */
  chargeOnAccept?: { id: string; author: Identity; cost: number };
}

const FORWARD: FrameVerdict = { forward: true };

function problemOf(status: number, type: string, title: string, detail: string): Problem {
  return { type: `urn:sluice:problem:${type}`, title, status, detail };
}

/**
 * The one admission step for HTTP requests and WebSocket frames: the proxies hand it the
 * facts and get a verdict; identity, cost, quota decisions and their metrics live here.
 *
 * Checks run from cheapest to dearest, and work is charged before it is done: the frame
 * rate of the source address (memory), parsing with size bounds, the sender's quota (the API
 * key it presented, else its address), signature verification, the verified author's
 * quota, which only events not seen before pay (a replay is answered `duplicate:`), and last,
 * while the node is under pressure, the node's write budget, once per write.
 */
export class Admission {
  /** Frames per source address in the current second, for the most recent addresses. */
  private readonly frameRate: WindowCounters;
  /** Shadow-mode refusals reach the log at most once a second, each line with its count. */
  private readonly shadowLog = new IntervalSampler(SHADOW_LOG_INTERVAL_MS);
  /** nostr.costs, compiled once (nostr settings are not reloaded). */
  private readonly costs: CostTable;
  private readonly blockedKind: (kind: number) => boolean;

  constructor(private readonly ctx: GatewayContext) {
    const { maxTrackedClients } = ctx.config.limits;
    this.frameRate = new WindowCounters(maxTrackedClients);
    this.costs = compileCosts(ctx.config.nostr.costs);
    this.blockedKind = kindMatcher(ctx.config.nostr.blockedKinds);
    boundIdentityKeys(maxTrackedClients);
    ctx.metrics.countTrackedClients(() => ({
      'identity-keys': identityKeys().size,
      'frame-rate': this.frameRate.size,
      ...ctx.decider.trackedClients(),
    }));
  }

  /** The identity charged for every write a client sends, whatever it carries. */
  sender(facts: SenderFacts): Identity {
    const { order, keySalt } = this.ctx.config.identity;
    const senderOrder = order.filter((s) => s !== 'pubkey');
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
    const decided = await ctx.decider.decide({
      identity,
      ip: facts.ip,
      cls,
      cost,
      nodeId: node.id,
    });
    if (!decided) return { action: 'forward', node, target, headers: {} };
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
    if (!refusal || refusal.admitted) return { action: 'forward', node, target, headers };
    // A quota store failure in fail-closed mode is our problem, not the client's: 503, never 429.
    return refusal.outcome === 'error'
      ? answer(storeUnavailableProblem(), { 'retry-after': '1' })
      : answer(quotaProblem(refusal), headers);
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
    switch (frame.type) {
      case 'MALFORMED':
        return { forward: false, reply: ['NOTICE', `invalid: ${frame.reason}`] };
      case 'BAD_EVENT':
        return { forward: false, reply: ['OK', frame.id, false, `invalid: ${frame.reason}`] };
      case 'EVENT':
        return this.event(conn, frame.event, data.length);
      case 'REQ':
      case 'COUNT': {
        const refused =
          this.subscriptionRefusal(conn, frame) ??
          (await this.charge(this.sender(conn), conn, 'read', 1));
        if (refused !== undefined) {
          return { forward: false, reply: ['CLOSED', frame.subId, refused] };
        }
        if (frame.type === 'REQ') conn.subscriptions?.add(frame.subId);
        return FORWARD;
      }
      case 'CLOSE':
        if (frame.subId !== undefined) conn.subscriptions?.delete(frame.subId);
        return FORWARD;
      case 'AUTH':
        return conn.auth ? this.authFrame(conn, conn.auth, frame.event) : FORWARD;
      default:
        return FORWARD;
    }
  }

  /**
   * `restricted:` when a REQ or COUNT has more filters than nostr.maxFiltersPerReq, or a REQ
   * would open one subscription more than nostr.maxSubscriptions (a REQ reusing an open id
   * replaces that subscription and counts once). Refused before anything is charged.
   */
  private subscriptionRefusal(
    conn: ConnectionFacts,
    frame: { type: 'REQ' | 'COUNT'; subId: string; filters: number },
  ): string | undefined {
    const { maxFiltersPerReq, maxSubscriptions } = this.ctx.config.nostr;
    if (maxFiltersPerReq !== undefined && frame.filters > maxFiltersPerReq) {
      this.ctx.metrics.frames.inc({ type: 'RESTRICTED' });
      return `restricted: at most ${maxFiltersPerReq} filters per ${frame.type}`;
    }
    if (maxSubscriptions === undefined || frame.type !== 'REQ') return undefined;
    const open = (conn.subscriptions ??= new Set());
    if (open.has(frame.subId) || open.size < maxSubscriptions) return undefined;
    this.ctx.metrics.frames.inc({ type: 'RESTRICTED' });
    return `restricted: at most ${maxSubscriptions} open subscriptions per connection; CLOSE one first`;
  }

  /**
   * An EVENT of `bytes` bytes (the message as received): refused outright by kind, else
   * charged its cost (nostr.costs) to the sender and then to its verified author.
   */
  private async event(conn: ConnectionFacts, event: Event, bytes: number): Promise<FrameVerdict> {
    const { ctx } = this;
    const { nostr, identity } = ctx.config;
    const notOk = (message: string): FrameVerdict => ({
      forward: false,
      reply: ['OK', event.id, false, message],
    });
    if (this.blockedKind(event.kind)) {
      ctx.metrics.frames.inc({ type: 'BLOCKED' });
      return notOk(`blocked: events of kind ${event.kind} are not accepted here`);
    }
    if (nostr.authRequiredForWrites && conn.authPubkey === undefined) {
      ctx.metrics.frames.inc({ type: 'AUTH_REQUIRED' });
      return notOk('auth-required: authenticate (NIP-42 AUTH) before writing to this relay');
    }
    let cost = eventCost(this.costs, event.kind, bytes);
    const sender = this.sender(conn);
    const { pow } = nostr;
    if (pow.minDifficulty > 0 || pow.discount) {
      // Judged on the id as claimed first (a refusal needs no hashing), then on the id the
      // event really hashes to: a forged id claiming work pays full price, as a forgery.
      const work = workDone(event.id, event.tags);
      if (work < pow.minDifficulty) {
        ctx.metrics.frames.inc({ type: 'POW' });
        return notOk(`pow: difficulty ${work} is below the required ${pow.minDifficulty}`);
      }
      if (!eventIdMatches(event)) {
        await this.charge(sender, conn, 'write', cost);
        return this.doesNotVerify(conn, notOk('invalid: event id does not match its content'));
      }
      cost = discountedCost(cost, work, pow.minDifficulty, pow.discount);
    }
    const refusedSender = await this.charge(sender, conn, 'write', cost);
    if (refusedSender !== undefined) return notOk(refusedSender);
    // Last, once every per-client charge admitted the event: the node's write budget.
    const withinBudget = async (): Promise<FrameVerdict> => {
      const refused = await this.nodeBudgetRefusal(sender, conn, cost);
      return refused === undefined ? FORWARD : notOk(refused);
    };
    const quotasOn = ctx.config.quotas.enabled;
    if (nostr.verify === 'relay' && quotasOn && identity.order.includes('pubkey')) {
      return this.authorAfterRelay(conn, event, cost, sender);
    }
    if (!verifies(nostr.verify, identity.order, quotasOn)) return withinBudget();
    if (!verifySignature(event)) {
      return this.doesNotVerify(conn, notOk('invalid: event id or signature does not verify'));
    }
    if (!quotasOn || !identity.order.includes('pubkey')) return withinBudget();
    const author = makeIdentity('pubkey', event.pubkey, ctx.policy.defaultTier, identity.keySalt);
    const seen = await this.claimFirstSight(event.id, author);
    if (seen === 'duplicate') {
      ctx.metrics.frames.inc({ type: 'DUPLICATE' });
      return {
        forward: false,
        reply: ['OK', event.id, true, 'duplicate: already have this event'],
      };
    }
    const refused =
      (await this.charge(author, conn, 'write', cost)) ??
      (await this.nodeBudgetRefusal(sender, conn, cost));
    if (refused === undefined) return FORWARD;
    // Not admitted: its author may send it again later, so it was never "seen".
    if (seen === 'claimed') await ctx.store.kv.del(seenKey(ctx, event.id)).catch(() => undefined);
    return notOk(refused);
  }

  /**
   * A client's AUTH event, checked by the gateway before the relay sees it: well-formed,
   * kind 22242, the challenge the relay sent on this connection, the relay tag naming
   * nostr.publicUrl, created recently, and (the dear part, at most MAX_AUTH_ATTEMPTS times
   * per connection) signed. Forwarded then; the relay's OK true binds its pubkey (see
   * ProxiedConnection). Anything else is answered OK false here and not forwarded.
   */
  private authFrame(conn: ConnectionFacts, auth: ConnectionAuth, raw: unknown): FrameVerdict {
    const parsed = parseEvent(raw);
    if (parsed.type === 'BAD_EVENT') {
      return { forward: false, reply: ['OK', parsed.id, false, `invalid: ${parsed.reason}`] };
    }
    const { event } = parsed;
    const notOk = (message: string): FrameVerdict => {
      this.ctx.metrics.frames.inc({ type: 'AUTH_REFUSED' });
      return { forward: false, reply: ['OK', event.id, false, message] };
    };
    if (auth.challenge === undefined) {
      return notOk('restricted: no AUTH challenge was sent on this connection');
    }
    const problem = authEventProblem(event, {
      challenge: auth.challenge,
      relayUrl: this.ctx.config.nostr.publicUrl!,
      nowSec: Math.floor(Date.now() / 1000),
    });
    if (problem) return notOk(`invalid: ${problem}`);
    if (auth.attempts >= MAX_AUTH_ATTEMPTS) {
      return notOk(`restricted: at most ${MAX_AUTH_ATTEMPTS} AUTH attempts per connection`);
    }
    auth.attempts++;
    if (!verifySignature(event)) {
      return this.doesNotVerify(conn, notOk('invalid: event id or signature does not verify'));
    }
    auth.pending.set(event.id, event.pubkey);
    return FORWARD;
  }

  /** An EVENT whose id or signature is false: counted, and past the bound the connection closes. */
  private doesNotVerify(conn: ConnectionFacts, verdict: FrameVerdict): FrameVerdict {
    conn.invalidEvents++;
    this.ctx.metrics.frames.inc({ type: 'INVALID_SIGNATURE' });
    if (conn.invalidEvents < this.ctx.config.nostr.maxInvalidEvents) return verdict;
    return { ...verdict, close: { code: 1008, reason: 'too many events that do not verify' } };
  }

  /**
   * nostr.verify relay: the relay checks the signature, and its `OK` true charges the author
   * (see `accepted`). Until then only what this process already knows can refuse the author:
   * its in-memory block, set by an earlier charge that reached the limit.
   */
  private async authorAfterRelay(
    conn: ConnectionFacts,
    event: Event,
    cost: number,
    sender: Identity,
  ): Promise<FrameVerdict> {
    const { ctx } = this;
    const author = makeIdentity(
      'pubkey',
      event.pubkey,
      ctx.policy.defaultTier,
      ctx.config.identity.keySalt,
    );
    const known = ctx.decider.knownOverLimit({
      identity: author,
      cls: 'write',
      nodeId: conn.nodeId,
    });
    const chargeOnAccept = { id: event.id, author, cost };
    const judged = known ? this.judged(known, author, 'write', conn.nodeId) : undefined;
    const refused =
      judged?.admitted === false
        ? nostrRejection(judged)
        : await this.nodeBudgetRefusal(sender, conn, cost);
    if (refused === undefined) return { forward: true, chargeOnAccept };
    return { forward: false, reply: ['OK', event.id, false, refused] };
  }

  /**
   * The relay accepted an event forwarded under nostr.verify relay: its author pays now. A
   * refusal cannot take the event back; it blocks the author's next ones (in memory).
   */
  async accepted(conn: ConnectionFacts, author: Identity, cost: number): Promise<void> {
    await this.charge(author, conn, 'write', cost);
  }

  /**
   * Mark an event as admitted by some gateway for the author's quota window (SET NX), so a
   * replay from anyone is answered `duplicate:` without charging its author. Without the
   * store the event is judged as new (the insurance limiter still bounds the author).
   */
  private async claimFirstSight(
    id: string,
    author: Identity,
  ): Promise<'claimed' | 'duplicate' | 'unknown'> {
    const { ctx } = this;
    const windowSec = ctx.policy.limitOf(author.tier, 'write')?.windowSec;
    if (!windowSec || !ctx.config.quotas.enabled || ctx.decider.storeDown) return 'unknown';
    try {
      const fresh = await ctx.store.kv.claim(seenKey(ctx, id), '1', windowSec * 1000);
      return fresh ? 'claimed' : 'duplicate';
    } catch (err) {
      if (err instanceof StoreError) return 'unknown';
      throw err;
    }
  }

  /**
   * Undefined when admitted, else the NIP-01 message of the refusal. A cost of 0 (a kind the
   * operator made free) admits without consuming: no Valkey round trip.
   */
  private async charge(
    identity: Identity,
    conn: ConnectionFacts,
    cls: 'write' | 'read',
    cost: number,
  ): Promise<string | undefined> {
    if (cost === 0) return undefined;
    const decided = await this.ctx.decider.decide({
      identity,
      ip: conn.ip,
      cls,
      cost,
      nodeId: conn.nodeId,
    });
    if (!decided) return undefined;
    const decision = this.judged(decided, identity, cls, conn.nodeId);
    return decision.admitted ? undefined : nostrRejection(decision);
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

  /** Undefined when the node's budget admits the write, else the NIP-01 message. */
  private async nodeBudgetRefusal(
    sender: Identity,
    conn: ConnectionFacts,
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
    else recordDecision(ctx, judged, cls, nodeId);
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

function answer(problem: Problem, headers: Record<string, string> = {}): HttpVerdict {
  return { action: 'answer', problem, headers };
}

/** OK false for an EVENT whose id can be found without parsing, NOTICE otherwise. */
function refusal(data: Buffer, reason: string): unknown[] {
  const id = sniffEventId(data.toString('utf8', 0, Math.min(data.length, 64 * 1024)));
  return id ? ['OK', id, false, reason] : ['NOTICE', reason];
}

/** Event ids are hashes of verified content: their own hash tag spreads them over slots. */
function seenKey(ctx: GatewayContext, id: string): string {
  return `${ctx.config.quotas.keyPrefix}:seen:{${id}}`;
}
