import type { Writable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import type { RawData, WebSocket } from 'ws';
import { startsCompactEvent } from '../nostr/message-heads.js';
import { closingNotice, GATEWAY_ERROR_NOTICE } from '../nostr/refusals.js';
import type { SessionAction } from '../nostr/session.js';
import type { ConnectionFacts } from './admission.js';
import type { GatewayContext } from './context.js';
import type { TurnWrites } from './turn-writes.js';
import type { Drainable } from './ws-drain.js';

/** Who is on the other end of a client connection, fixed at connect. */
export interface ConnectionInfo {
  ip: string;
  apiKey?: string;
  nodeId: string;
}

/** The sockets under the two WebSockets, and what holds their writes for a callback. */
export interface HeldWrites {
  writes: TurnWrites;
  /** The client's socket: a subscription's events read together leave together. */
  socket: Writable;
  /** The relay's socket: a client's frames read together leave together. */
  upstream?: Writable;
}

/** Bytes buffered towards one side before the other side is paused. */
const HIGH_WATER = 1024 * 1024;
const LOW_WATER = 256 * 1024;
/**
 * A client the gateway closes for not reading, or moves off a node (pressure.drain), gets
 * this long to take its close frame and answer it before it is cut: ws alone would hold the
 * socket, and the bytes buffered for it, 30 s for a client that never reads.
 */
const CLOSE_GRACE_MS = 1000;
/**
 * How long the relay socket outlives the client's while events still await the relay's OK
 * (their charges are settled on it); past this the relay socket closes and what is left is
 * settled as NostrSession.upstreamGone says.
 */
const SETTLE_AFTER_CLOSE_MS = 10_000;
/** The head of a client's EVENT or AUTH, which the relay answers with an OK. */
const ANSWERED_HEAD = /^\s*\[\s*"(?:EVENT|AUTH)"/;
/** The head of a relay's OK. */
const OK_START = /^\s*\[\s*"OK"/;

/** Close codes a peer may send; reserved ones (1005, 1006, 1015) are mapped. */
export function relayableCloseCode(code: number): number {
  if (code === 1005) return 1000;
  if (code === 1006 || code === 1015) return 1011;
  const valid =
    (code >= 1000 && code <= 1003) ||
    (code >= 1007 && code <= 1014) ||
    (code >= 3000 && code <= 4999);
  return valid ? code : 1011;
}

/** What most relay messages (a subscription's events) ask of the session: nothing, unallocated. */
const NO_ACTIONS: readonly SessionAction[] = [];

/**
 * One client connection pinned to one relay node: the byte pump. Client frames are decided in
 * arrival order (a queue, so a REQ never overtakes the EVENT before it) by the admission
 * step; relay frames pass untouched (or are withheld), shown to the connection's NostrSession
 * first, and the pump does what the session asks (charges, claims, a CLOSE to the relay).
 * Every EVENT is answered once: by the relay when forwarded, by the gateway when not.
 */
export class ProxiedConnection implements Drainable {
  private readonly queue: { data: RawData; isBinary: boolean }[] = [];
  private draining = false;
  private pausedForQueue = false;
  private pausedForUpstream = false;
  /** Not reading from the client while it does not read what it is sent. */
  private pausedForClient = false;
  private closed = false;
  /** Bytes buffered towards the client: past the high water it is paused, past the bound closed. */
  private readonly clientBound: { high: number; low: number; max: number };
  /** Who the client is and its Nostr session. */
  private readonly facts: ConnectionFacts;
  /** The relay socket is kept open after the client's close until this fires (or settled). */
  private settleTimer: NodeJS.Timeout | undefined;
  /** The client is gone and the relay socket stays only for the answers still awaited. */
  private lingering = false;
  /** The client went while a frame was being decided: what to close the relay socket with. */
  private upstreamCloseAfterDrain: { code: number; reason: string } | undefined;
  /**
   * EVENTs and AUTHs forwarded and not yet answered by an OK (counted only under
   * pressure.drain, whose moves wait for them): a connection is moved once this is 0.
   */
  private inFlight = 0;
  private readonly countsInFlight: boolean;
  /** Chosen by the drainer: not read from, closed 1013 once nothing of it is in flight. */
  private leavingAs: { notice: string; reason: string; timer: NodeJS.Timeout } | undefined;

  constructor(
    private readonly client: WebSocket,
    private readonly upstream: WebSocket,
    private readonly ctx: GatewayContext,
    private readonly info: ConnectionInfo,
    private readonly held: HeldWrites,
    private readonly onGone: () => void,
  ) {
    this.facts = { ...info, session: ctx.admission.newSession() };
    const max = ctx.config.limits.maxBufferedBytesPerClient;
    const high = Math.min(HIGH_WATER, Math.floor(max / 2));
    this.clientBound = { high, low: Math.floor(high / 4), max };
    this.countsInFlight = ctx.config.pressure.drain.enabled;
    client.on('message', (data, isBinary) => this.enqueue(data, isBinary));
    upstream.on('message', (data, isBinary) => {
      const { session } = this.facts;
      let actions: readonly SessionAction[] = NO_ACTIONS;
      if (!isBinary && (session.following || this.inFlight > 0)) {
        const buf = toBuffer(data);
        if (this.inFlight > 0 && OK_START.test(buf.toString('latin1', 0, 16))) this.inFlight--;
        actions = session.relay(buf);
      }
      // The message reaches the client before what it causes (an OK before the close it ends in).
      if (!actions.some((a) => a.type === 'withhold')) {
        // A subscription's events come many to a read: they leave together. An OK, one to a
        // read, goes at once.
        if (!isBinary && isCompactEvent(data)) this.held.writes.hold(this.held.socket);
        this.toClient(data, isBinary);
      }
      for (const action of actions) this.act(action);
      if (this.lingering && session.awaitingCount === 0) this.closeUpstream(1000, 'client closed');
      if (this.leavingAs) this.leaveIfSettled();
    });
    client.on('close', (code) =>
      this.closeBoth(relayableCloseCode(code), 'client closed', 'client'),
    );
    upstream.on('close', (code, reason) => {
      clearTimeout(this.settleTimer);
      for (const action of this.facts.session.upstreamGone()) this.act(action);
      this.closeBoth(relayableCloseCode(code), reason.toString() || 'relay closed', 'upstream');
    });
    client.on('error', (err) => this.fail('client', err));
    upstream.on('error', (err) => this.fail('upstream', err));
    // Before any relay message (those arrive on later turns): the gateway's own AUTH challenge.
    for (const message of this.facts.session.greeting()) this.send(message);
  }

  /** Close both sides (gateway shutdown uses 1001, going away). */
  close(code: number, reason: string): void {
    this.closeBoth(code, reason, 'gateway');
  }

  get nodeId(): string {
    return this.info.nodeId;
  }

  get idle(): boolean {
    return (
      this.queue.length === 0 &&
      !this.draining &&
      this.inFlight === 0 &&
      this.facts.session.awaitingCount === 0
    );
  }

  get leaving(): boolean {
    return this.leavingAs !== undefined;
  }

  /**
   * Move this client to another node (pressure.drain): stop reading from it, let what it
   * already sent be decided and answered (at most settleMs), then a NOTICE and a close 1013.
   * What it sends meanwhile stays unread: no OK for it, so a client resends it elsewhere.
   */
  leave(notice: string, reason: string): void {
    if (this.closed || this.leavingAs) return;
    const timer = setTimeout(
      () => this.finishLeaving(),
      this.ctx.config.pressure.drain.settleMs,
    ).unref();
    this.leavingAs = { notice, reason, timer };
    this.client.pause();
    this.leaveIfSettled();
  }

  private leaveIfSettled(): void {
    if (this.idle) this.finishLeaving();
  }

  private finishLeaving(): void {
    const leaving = this.leavingAs;
    if (!leaving || this.closed) return;
    clearTimeout(leaving.timer);
    this.send(['NOTICE', leaving.notice]);
    this.closeBoth(1013, leaving.reason, 'gateway');
    // Read again, or the client's answering close frame would sit unread and the closing
    // handshake would last until ws's timeout; nothing read now is decided (closed).
    this.client.resume();
    this.cutAfterGrace();
  }

  private enqueue(data: RawData, isBinary: boolean): void {
    if (this.closed) return;
    this.queue.push({ data, isBinary });
    if (this.queue.length >= this.ctx.config.limits.maxQueuedFrames && !this.pausedForQueue) {
      this.pausedForQueue = true;
      this.client.pause();
    }
    if (!this.draining) void this.drain();
  }

  private async drain(): Promise<void> {
    this.draining = true;
    while (this.queue.length > 0 && !this.closed) {
      const { data, isBinary } = this.queue.shift()!;
      try {
        await this.handle(toBuffer(data), isBinary);
      } catch (err) {
        this.ctx.metrics.internalErrors.inc({ where: 'frame' });
        this.ctx.log.error({ err }, 'frame handling failed');
        this.send(['NOTICE', GATEWAY_ERROR_NOTICE]);
      }
      if (this.pausedForQueue && this.queue.length <= this.ctx.config.limits.maxQueuedFrames / 2) {
        this.pausedForQueue = false;
        this.resumeClientIfFree();
      }
    }
    this.draining = false;
    const pending = this.upstreamCloseAfterDrain;
    if (pending) {
      this.upstreamCloseAfterDrain = undefined;
      this.settleUpstream(pending.code, pending.reason);
    }
    if (this.leavingAs) this.leaveIfSettled();
  }

  private async handle(data: Buffer, isBinary: boolean): Promise<void> {
    const verdict = await this.ctx.admission.frame(this.facts, data, isBinary);
    // An early retry: its answer, and what this connection sent after it, wait (a bouncer is
    // slowed; its unread frames back up into the kernel once maxQueuedFrames are queued).
    if (verdict.holdMs) await sleep(verdict.holdMs);
    if (verdict.forward) {
      if (this.countsInFlight && ANSWERED_HEAD.test(data.toString('latin1', 0, 16))) {
        this.inFlight++;
      }
      this.toUpstream(data);
    }
    if (verdict.reply) this.send(verdict.reply);
    if (verdict.close) this.closeForPolicy(verdict.close.code, verdict.close.reason);
  }

  private closeForPolicy(code: number, reason: string): void {
    if (this.closed) return;
    this.ctx.metrics.countFrame('CLOSED_FOR_POLICY');
    this.send(['NOTICE', closingNotice(reason)]);
    this.closeBoth(code, reason, 'gateway');
    // A client closed for its policy (a bouncer, a forger) that does not answer the close
    // frame would hold its socket until ws's own timeout (30 s): cut it after the grace.
    this.cutAfterGrace();
  }

  /** What the session asked after a relay message: a frame to the relay, or a ticket settled. */
  private act(action: SessionAction): void {
    if (action.type === 'close-upstream') {
      this.toUpstream(Buffer.from(JSON.stringify(['CLOSE', action.subId])));
      return;
    }
    if (action.type === 'unbind') {
      this.ctx.metrics.countFrame('AUTH_REFUSED');
      return;
    }
    if (action.type !== 'settle') return;
    action.ticket.settle(action.verdict).then(
      (settled) => {
        if (settled.invalid && this.facts.session.invalid()) {
          this.closeForPolicy(1008, 'too many events that do not verify');
        }
      },
      (err: unknown) => {
        this.ctx.metrics.internalErrors.inc({ where: 'frame' });
        this.ctx.log.error({ err, action: action.type }, 'settling a relay answer failed');
      },
    );
  }

  private send(message: unknown[]): void {
    this.toClient(Buffer.from(JSON.stringify(message)), false);
  }

  /** A frame reached the client's socket (one function for all, not one for each frame). */
  private readonly clientWrote = (): void => {
    if (this.client.bufferedAmount >= this.clientBound.low) return;
    if (this.upstream.isPaused) this.upstream.resume();
    if (this.pausedForClient) {
      this.pausedForClient = false;
      this.resumeClientIfFree();
    }
  };

  /** A frame reached the relay's socket. */
  private readonly upstreamWrote = (): void => {
    if (this.pausedForUpstream && this.upstream.bufferedAmount < LOW_WATER) {
      this.pausedForUpstream = false;
      this.resumeClientIfFree();
    }
  };

  private toClient(data: RawData, isBinary: boolean): void {
    if (this.client.readyState !== this.client.OPEN) return;
    const bound = this.clientBound;
    this.client.send(data, { binary: isBinary }, this.clientWrote);
    const buffered = this.client.bufferedAmount;
    if (buffered > bound.max) {
      this.closeSlowClient();
      return;
    }
    if (buffered <= bound.high) return;
    // A slow client: stop reading from the relay, and from the client too (what it sends is
    // answered, and would pile up here): its own writes back up in the kernel instead.
    if (!this.upstream.isPaused) this.upstream.pause();
    if (!this.pausedForClient) {
      this.pausedForClient = true;
      this.client.pause();
      this.ctx.metrics.slowClients.inc({ action: 'paused' });
    }
  }

  /** Past the bound: close (1008), and cut the socket if the close frame is not taken either. */
  private closeSlowClient(): void {
    this.ctx.metrics.slowClients.inc({ action: 'closed' });
    this.closeBoth(1008, 'the client does not read what it is sent', 'gateway');
    this.cutAfterGrace();
  }

  /** After a close the gateway started: cut the client if it has not completed it in time. */
  private cutAfterGrace(): void {
    const client = this.client;
    setTimeout(() => {
      if (client.readyState !== client.CLOSED) client.terminate();
    }, CLOSE_GRACE_MS).unref();
  }

  private toUpstream(data: Buffer): void {
    if (this.upstream.readyState !== this.upstream.OPEN) return;
    // More of this read waits behind this frame (a CLOSE and the next REQ, the REQs a client
    // opens with): they leave together. A frame alone goes at once, as a write's EVENT does.
    if (this.held.upstream && this.queue.length > 0) this.held.writes.hold(this.held.upstream);
    this.upstream.send(data, { binary: false }, this.upstreamWrote);
    if (this.upstream.bufferedAmount > HIGH_WATER && !this.pausedForUpstream) {
      this.pausedForUpstream = true;
      this.client.pause();
    }
  }

  private resumeClientIfFree(): void {
    if (this.leavingAs) return;
    if (!this.pausedForQueue && !this.pausedForUpstream && !this.pausedForClient) {
      this.client.resume();
    }
  }

  private fail(side: string, err: Error): void {
    this.ctx.log.debug({ err, side }, 'websocket error');
    this.closeBoth(1011, `${side} error`, side);
  }

  private closeBoth(code: number, reason: string, initiator: string): void {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.leavingAs?.timer);
    this.queue.length = 0;
    if (initiator !== 'client') closeSocket(this.client, code, reason);
    if (initiator !== 'upstream') {
      // A frame being decided may still go to the relay: settle once it has.
      if (this.draining) this.upstreamCloseAfterDrain = { code, reason };
      else this.settleUpstream(code, reason);
    }
    this.onGone();
  }

  /**
   * The client is gone: close the relay socket, unless events await the relay's answer,
   * which still comes and settles their charges (bounded by SETTLE_AFTER_CLOSE_MS).
   */
  private settleUpstream(code: number, reason: string): void {
    if (this.facts.session.awaitingCount === 0 || this.upstream.readyState !== this.upstream.OPEN) {
      this.closeUpstream(code, reason);
      return;
    }
    this.lingering = true;
    this.upstream.resume();
    this.settleTimer = setTimeout(
      () => this.closeUpstream(code, reason),
      SETTLE_AFTER_CLOSE_MS,
    ).unref();
  }

  private closeUpstream(code: number, reason: string): void {
    clearTimeout(this.settleTimer);
    closeSocket(this.upstream, code, reason);
  }
}

/**
 * A close reason ws accepts: at most 123 bytes of UTF-8 (ws throws past that), cut on a
 * character boundary. The relay's reasons are passed on, and may be any length or script.
 */
export function closeReason(reason: string): string {
  if (Buffer.byteLength(reason) <= 123) return reason;
  let cut = '';
  for (const char of reason) {
    if (Buffer.byteLength(cut + char) > 123) break;
    cut += char;
  }
  return cut;
}

function closeSocket(ws: WebSocket, code: number, reason: string): void {
  if (ws.readyState === ws.OPEN) ws.close(code, closeReason(reason));
  else if (ws.readyState === ws.CONNECTING) ws.terminate();
}

/**
 * A relay message that starts `["EVENT"`, as relays write a subscription's events. The same
 * message spelled with spaces is merely not held: it still goes, one write of its own.
 */
export function isCompactEvent(data: RawData): boolean {
  return Buffer.isBuffer(data) && startsCompactEvent(data);
}

function toBuffer(data: RawData): Buffer {
  if (Buffer.isBuffer(data)) return data;
  if (Array.isArray(data)) return Buffer.concat(data);
  return Buffer.from(data);
}
