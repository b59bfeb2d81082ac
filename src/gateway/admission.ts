import type { Event } from 'nostr-tools/pure';
import { boundIdentityKeys, identityKeys } from '../quota/identity-keys.js';
import { pubkeyIdentity } from '../quota/policy.js';
import type { Identity } from '../quota/policy.js';
import { nostrRejection } from '../quota/responses.js';
import { WindowCounters } from '../util/window-counters.js';
import { NostrSession } from '../nostr/session.js';
import type { SessionSettings } from '../nostr/session.js';
import { newChallenge } from '../nostr/nip42.js';
import {
  BINARY_FRAME_REFUSAL,
  EARLY_RETRY_CLOSE,
  frameRateRefusal,
  malformedRefusal,
  oversizedRefusal,
  retrySec,
} from '../nostr/refusals.js';
import { parseClientFrame, parseEvent, sniffEventId, verifySignature } from '../nostr/frames.js';
import { authorMode, runWrite, senderIdentities, senderIdentity } from '../write/pipeline.js';
import type { WriteServices } from '../write/write-state.js';
import { httpVerdict } from './http-admission.js';
import type { HttpFacts, HttpVerdict } from './http-admission.js';
import { writeServices } from './write-services.js';
import type { AdmissionServices } from './write-services.js';

export type { AdmissionServices } from './write-services.js';
export type { HttpFacts, HttpVerdict, SenderFacts } from './http-admission.js';

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
  /** Hold the reply (and the connection's later frames) this long: an early retry. */
  holdMs?: number;
}

const FORWARD: FrameVerdict = { forward: true };
const TOO_MANY_INVALID = { code: 1008, reason: 'too many events that do not verify' };

/**
 * Events per connection awaiting the relay's OK (to settle their tickets), and their frame
 * bytes: past either, EVENTs are refused until the relay answers.
 */
const MAX_AWAITING_OK = 1024;
const MAX_AWAITING_BYTES = 4 * 1024 * 1024;

/**
 * What the proxies ask of each request and frame: the checks of the message as a whole (its
 * target, size, rate, shape), then reads and writes decided; a write (an EVENT, an event
 * POSTed) goes through the one write pipeline (write/pipeline.ts), whichever transport.
 */
export class Admission {
  /** Frames per source address in the current second, for the most recent addresses. */
  private readonly frameRate: WindowCounters;
  /** What the write checks use. */
  readonly writes: WriteServices;

  constructor(
    private readonly ctx: AdmissionServices,
    now: () => number = Date.now,
  ) {
    const { maxTrackedClients } = ctx.config.limits;
    this.frameRate = new WindowCounters(maxTrackedClients, now);
    this.writes = writeServices(ctx, now);
    boundIdentityKeys(maxTrackedClients);
    ctx.policy.boundTrackedClients(maxTrackedClients);
    ctx.metrics.countTrackedClients(() => ({
      'identity-keys': identityKeys().size,
      'range-identities': ctx.policy.rangeIdentitiesHeld,
      'frame-rate': this.frameRate.size,
      'failed-checks': this.writes.failedChecks.size,
      'early-retries': this.writes.earlyRetries.size,
      'author-headroom': this.writes.headroom.size,
      'accepted-ids': this.writes.seen.size,
      ...ctx.decider.trackedClients(),
    }));
  }

  /** The identity charged for everything a client sends: its API key, else its address. */
  sender(facts: { ip: string; apiKey?: string | undefined }): Identity {
    return senderIdentity(this.ctx.config, this.ctx.policy, facts);
  }

  /** The identities charged for each write and read of a connection (see senderIdentities). */
  senders(conn: ConnectionFacts): Identity[] {
    const base = this.sender(conn);
    return senderIdentities(this.ctx.config, this.ctx.policy, base, conn.session.authPubkey);
  }

  /** An HTTP request: its target, class and size, then its quota (see http-event.ts). */
  http(facts: HttpFacts): Promise<HttpVerdict> {
    return httpVerdict(this.ctx, this.writes, facts);
  }

  async frame(conn: ConnectionFacts, data: Buffer, isBinary: boolean): Promise<FrameVerdict> {
    const { ctx } = this;
    const { maxFrameBytes, framesPerSecPerAddress } = ctx.config.limits;
    const rate = this.frameRate.consume(conn.ip, 1, 1000);
    if (rate.consumed > framesPerSecPerAddress) {
      ctx.metrics.countFrame('RATE_LIMITED');
      const reason = frameRateRefusal(retrySec(rate.msBeforeNext));
      return { forward: false, reply: refusal(data, reason) };
    }
    if (isBinary) {
      ctx.metrics.countFrame('MALFORMED');
      return { forward: false, reply: ['NOTICE', BINARY_FRAME_REFUSAL] };
    }
    if (data.length > maxFrameBytes) {
      ctx.metrics.countFrame('OVERSIZED');
      const reason = oversizedRefusal(data.length, maxFrameBytes);
      return { forward: false, reply: refusal(data, reason) };
    }
    const frame = parseClientFrame(data.toString('utf8'));
    ctx.metrics.countFrame(frame.type === 'BAD_EVENT' ? 'EVENT' : frame.type);
    switch (frame.type) {
      case 'MALFORMED':
        return { forward: false, reply: ['NOTICE', malformedRefusal(frame.reason)] };
      case 'BAD_EVENT':
        return { forward: false, reply: ['OK', frame.id, false, malformedRefusal(frame.reason)] };
      case 'EVENT':
        return this.event(conn, frame.event, data.length);
      case 'REQ':
      case 'COUNT':
        return this.read(conn, frame.type, frame.subId, frame.filters);
      case 'CLOSE':
        if (frame.subId !== undefined) conn.session.closeForwarded(frame.subId);
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
    const { nostr, limits } = this.ctx.config;
    return {
      author: authorMode(this.ctx.config),
      publicUrl: nostr.publicUrl,
      maxSubscriptions: nostr.maxSubscriptions,
      maxFiltersPerReq: nostr.maxFiltersPerReq,
      maxInvalidEvents: nostr.maxInvalidEvents,
      maxAwaiting: MAX_AWAITING_OK,
      maxAwaitingBytes: Math.max(MAX_AWAITING_BYTES, 2 * limits.maxFrameBytes),
    };
  }

  /**
   * Whether an EVENT (of `bytes`) would now be charged to its author on its hash alone,
   * unverified (see write/checks.ts, `route`); for tests that follow each path.
   */
  judgedOnHash(event: Event, bytes: number): boolean {
    const judged = this.writes.eventPolicy.judge(event, bytes);
    if (judged.refused !== undefined || this.sessionSettings().author !== 'gateway') return false;
    if (this.ctx.config.nostr.verify !== 'auto') return false;
    const author = pubkeyIdentity(
      'pubkey',
      event.pubkey,
      this.ctx.policy,
      this.ctx.config.identity.keySalt,
    );
    return this.writes.headroom.mayReserve(author.key, judged.cost);
  }

  /** An EVENT through the write pipeline, its outcome as NIP-01 answers it. */
  private async event(conn: ConnectionFacts, event: Event, bytes: number): Promise<FrameVerdict> {
    const { ip, apiKey, nodeId, session } = conn;
    const outcome = await runWrite(this.writes, { event, bytes, ip, apiKey, nodeId, session });
    if (outcome.type === 'forward') {
      session.eventForwarded(event.id, bytes, outcome.ticket);
      return FORWARD;
    }
    if (outcome.type === 'duplicate') {
      return {
        forward: false,
        reply: ['OK', event.id, true, 'duplicate: already have this event'],
      };
    }
    const verdict: FrameVerdict = {
      forward: false,
      reply: ['OK', event.id, false, outcome.message],
    };
    if (outcome.counts && session.invalid()) verdict.close = TOO_MANY_INVALID;
    if (outcome.early) {
      // Held before the close too: a bouncer that reconnects at once is answered no faster.
      verdict.holdMs = outcome.early.holdMs;
      if (outcome.early.closes) verdict.close = { code: 1008, reason: EARLY_RETRY_CLOSE };
    }
    return verdict;
  }

  /** A REQ or COUNT: the connection's bounds, then one read charged to every sender. */
  private async read(
    conn: ConnectionFacts,
    type: 'REQ' | 'COUNT',
    subId: string,
    filters: number,
  ): Promise<FrameVerdict> {
    const restricted = conn.session.reqRefusal(type, subId, filters);
    if (restricted !== undefined) this.ctx.metrics.countFrame('RESTRICTED');
    const refused = restricted ?? (await this.chargeReads(conn));
    if (refused !== undefined) return { forward: false, reply: ['CLOSED', subId, refused] };
    if (type === 'REQ') conn.session.reqForwarded(subId);
    return FORWARD;
  }

  /** Each sender in turn pays one read; the first refusal stops (its NIP-01 message). */
  private async chargeReads(conn: ConnectionFacts): Promise<string | undefined> {
    const { config } = this.ctx;
    const policy = this.ctx.policy.pin();
    const base = senderIdentity(config, policy, conn);
    const { ip, nodeId } = conn;
    for (const identity of senderIdentities(config, policy, base, conn.session.authPubkey)) {
      const req = { identity, ip, cls: 'read' as const, cost: 1, nodeId, policy };
      const decision = await this.writes.charger.take(req);
      if (decision && !decision.admitted) return nostrRejection(decision);
    }
    return undefined;
  }

  /**
   * A client's AUTH event, checked by the gateway before the relay sees it (see
   * NostrSession.auth): bound when it passes, and forwarded (or, under the gateway's own
   * challenge, answered OK true here); answered OK false here otherwise.
   */
  private authFrame(conn: ConnectionFacts, raw: unknown): FrameVerdict {
    const parsed = parseEvent(raw);
    if (parsed.type === 'BAD_EVENT') {
      return { forward: false, reply: ['OK', parsed.id, false, malformedRefusal(parsed.reason)] };
    }
    const nowSec = Math.floor(this.writes.now() / 1000);
    const verdict = conn.session.auth(parsed.event, nowSec);
    if (verdict.bound !== undefined) return { forward: verdict.forward, reply: verdict.reply };
    this.ctx.metrics.countFrame('AUTH_REFUSED');
    const refused: FrameVerdict = { forward: false, reply: verdict.reply };
    if (!verdict.invalidSignature) return refused;
    this.ctx.metrics.countFrame('INVALID_SIGNATURE');
    return conn.session.invalid() ? { ...refused, close: TOO_MANY_INVALID } : refused;
  }
}

/**
 * Whether the gateway verifies an EVENT itself (~0.25 ms of CPU): only where the author is
 * charged (the pubkey identity with quotas on), or when asked for every event.
 */
export function verifies(
  mode: AdmissionServices['config']['nostr']['verify'],
  order: readonly string[],
  quotasEnabled: boolean,
): boolean {
  return mode === 'always' || (mode === 'auto' && quotasEnabled && order.includes('pubkey'));
}

/** OK false for an EVENT whose id can be found without parsing, NOTICE otherwise. */
function refusal(data: Buffer, reason: string): unknown[] {
  const id = sniffEventId(data.toString('utf8', 0, Math.min(data.length, 64 * 1024)));
  return id ? ['OK', id, false, reason] : ['NOTICE', reason];
}
