import type { IncomingMessage, Server } from 'node:http';
import type { Duplex, Writable } from 'node:stream';
import { WebSocket, WebSocketServer } from 'ws';
import { AddressSlots } from './address-slots.js';
import type { GatewayContext } from './context.js';
import { parseRequestTarget } from './request-target.js';
import { blameOf } from './upstream-io.js';
import type { UpstreamState } from './upstreams.js';
import { TurnWrites } from './turn-writes.js';
import { checkUpgradeRequest, rejectUpgrade } from './upgrade-request.js';
import type { UpgradeRefusal } from './upgrade-request.js';
import { ProxiedConnection } from './ws-connection.js';
import { ConnectionDrainer } from './ws-drain.js';

/** What every upgrade attempt shares. */
interface ProxyState {
  ctx: GatewayContext;
  wss: WebSocketServer;
  slots: AddressSlots;
  connections: Set<ProxiedConnection>;
  /** A subscription's events to a client, read together, leave together (turn-writes.ts). */
  writes: TurnWrites;
}

/** Seconds a client refused for holding too many connections is asked to wait. */
const RETRY_AFTER_FULL_SEC = 10;

/**
 * WebSocket upgrades on any path: the connection is pinned to one relay node (chosen by the
 * routing mode at connect) and accepted only once that node's socket is open, so a client
 * never holds a connection that leads nowhere. Under pressure.drain, connections pinned to a
 * node in trouble are moved a few at a time (ws-drain.ts).
 *
 * Nothing a client sends escapes the upgrade handler: a request ws would refuse is answered
 * before a relay socket is opened, the relay socket is closed on every path where the client
 * handshake does not complete, and anything thrown answers 500 and is counted.
 */
export function attachWebSocketProxy(server: Server, ctx: GatewayContext) {
  const { limits } = ctx.config;
  // Frames above maxFrameBytes are answered by the gateway; far larger ones close the socket
  // (1009) before they are buffered.
  const maxPayload = limits.maxFrameBytes * 8;
  const state: ProxyState = {
    ctx,
    wss: new WebSocketServer({ noServer: true, maxPayload, perMessageDeflate: false }),
    slots: new AddressSlots(limits.maxConnectionsPerAddress),
    connections: new Set(),
    writes: new TurnWrites(),
  };

  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on('error', () => socket.destroy());
    new UpgradeAttempt(state, req, socket, head).start();
  });

  const { drain } = ctx.config.pressure;
  const drainer = drain.enabled
    ? new ConnectionDrainer(
        state.connections,
        () => ctx.pool.list(),
        (id) => ctx.board.headroom(id),
        drain,
        (nodeId) => ctx.metrics.countDrained(nodeId),
      )
    : undefined;
  drainer?.start();

  return {
    /** Close every connection with 1001 (going away). */
    closeAll(reason: string): void {
      drainer?.stop();
      for (const conn of [...state.connections]) conn.close(1001, reason);
      state.wss.close();
    },
    get size() {
      return state.connections.size;
    },
  };
}

/**
 * One upgrade request, from its validation to a proxied connection or a refusal. Whatever it
 * holds on the way (a slot of its address, a relay socket) is given back on every path.
 */
class UpgradeAttempt {
  /** The client was answered, went away or was handed to a connection. */
  private settled = false;
  private releaseSlot: (() => void) | undefined;
  private upstream: WebSocket | undefined;
  /** The relay socket under `upstream`, once its handshake is answered. */
  private upstreamSocket: Writable | undefined;
  private timer: NodeJS.Timeout | undefined;
  private timedOut = false;
  private readonly onClientClose = () => this.abandon();

  constructor(
    private readonly state: ProxyState,
    private readonly req: IncomingMessage,
    private readonly socket: Duplex,
    private readonly head: Buffer,
  ) {}

  start(): void {
    this.guarded(() => this.run());
  }

  /**
   * Run a step of the attempt (the start, or a handler of the relay socket) so that anything
   * it throws answers the client (500) and gives everything back instead of escaping.
   */
  private guarded(step: () => void): void {
    try {
      step();
    } catch (err) {
      const { ctx } = this.state;
      ctx.metrics.internalErrors.inc({ where: 'upgrade' });
      ctx.log.error({ err }, 'websocket upgrade failed');
      // Once handed over, the socket speaks WebSocket: close it rather than answer HTTP.
      if (this.settled) this.socket.destroy();
      this.fail('internal', {
        status: 500,
        type: 'internal-error',
        detail: 'the gateway could not handle this upgrade',
      });
    }
  }

  private run(): void {
    const { ctx, slots } = this.state;
    const target = parseRequestTarget(this.req.url);
    if (!target) {
      return this.fail('bad-request', {
        status: 400,
        type: 'bad-request-target',
        detail: 'the request target is not usable',
      });
    }
    // Denied paths (the relay's operator endpoints) are denied over every protocol.
    if (ctx.policy.classify('GET', target.path).cls === 'deny') {
      return this.fail('denied', { status: 404, type: 'not-found', detail: 'no such resource' });
    }
    const invalid = checkUpgradeRequest(this.req);
    if (invalid) return this.fail('bad-request', invalid);

    const ip = ctx.address.ip(this.req);
    this.releaseSlot = slots.acquire(ip);
    if (!this.releaseSlot) {
      const max = ctx.config.limits.maxConnectionsPerAddress;
      return this.fail('per-address', {
        status: 429,
        type: 'too-many-connections',
        detail: `at most ${max} WebSocket connections per client address; retry in ${RETRY_AFTER_FULL_SEC} s`,
        headers: { 'retry-after': String(RETRY_AFTER_FULL_SEC) },
      });
    }
    const apiKeyHeader = this.req.headers[ctx.config.identity.apiKeyHeader];
    const apiKey = Array.isArray(apiKeyHeader) ? apiKeyHeader[0] : apiKeyHeader;
    const node = ctx.pool.pick(ctx.admission.sender({ apiKey, ip }).key, true);
    if (!node) {
      return this.fail('no-relay', {
        status: 503,
        type: 'no-relay',
        detail: 'no relay node is available; retry in 1 s',
        headers: { 'retry-after': '1' },
      });
    }
    this.socket.once('close', this.onClientClose);
    this.connect(node, target.forward, { ip, apiKey });
  }

  /** Answer the client with a refusal and give back what the attempt holds. */
  fail(reason: string, refusal: UpgradeRefusal): void {
    if (!this.settled) {
      this.state.ctx.metrics.upgradesRefused.inc({ reason });
      rejectUpgrade(this.socket, refusal);
    }
    this.abandon();
  }

  /** Give back the slot and the relay socket; the client is not (or no longer) served. */
  private abandon(): void {
    this.settled = true;
    clearTimeout(this.timer);
    this.socket.off('close', this.onClientClose);
    this.releaseSlot?.();
    const upstream = this.upstream;
    if (!upstream) return;
    if (upstream.readyState === upstream.OPEN) upstream.close(1001, 'client went away');
    else if (upstream.readyState === upstream.CONNECTING) upstream.terminate();
  }

  private connect(node: UpstreamState, path: string, who: { ip: string; apiKey?: string }): void {
    const { ctx } = this.state;
    const upstream = new WebSocket(node.url.replace(/^http/, 'ws') + path, {
      headers: { 'x-forwarded-for': ctx.address.forwardedFor(this.req) },
      perMessageDeflate: false,
      maxPayload: 64 * 1024 * 1024,
    });
    this.upstream = upstream;
    // The socket ws reads and writes the relay's frames on, for the pump to hold its writes.
    upstream.once('upgrade', (res) => (this.upstreamSocket = res.socket));
    this.timer = setTimeout(() => {
      this.timedOut = true;
      upstream.terminate(); // emits 'error', answered there
    }, ctx.config.healthCheck.timeoutMs * 5);
    upstream.on('unexpected-response', (_request, res) =>
      this.guarded(() => this.relayAnswered(node, res)),
    );
    upstream.on('error', (err) => this.guarded(() => this.relayFailed(node, err)));
    upstream.once('open', () => this.guarded(() => this.accept(upstream, node, who)));
  }

  /**
   * The relay answered HTTP instead of switching protocols: its answer is the client's (a 404
   * for a path it does not serve) and proves nothing about the relay's health.
   */
  private relayAnswered(node: UpstreamState, res: IncomingMessage): void {
    const status = res.statusCode ?? 502;
    const retryAfter = res.headers['retry-after'];
    this.fail('relay-answered', {
      status: status >= 400 && status <= 599 ? status : 502,
      type: 'relay-refused-upgrade',
      detail: `relay node ${node.id} answered the upgrade with ${status}`,
      headers: retryAfter && /^\d{1,6}$/.test(retryAfter) ? { 'retry-after': retryAfter } : {},
    });
  }

  /** Only a relay refusing, resetting or not answering in time counts against its health. */
  private relayFailed(node: UpstreamState, err: Error): void {
    if (this.settled) return; // from 'open' on, the connection's own handler deals with errors
    const { ctx } = this.state;
    if (this.timedOut || blameOf(err).party === 'relay') {
      ctx.metrics.upstreamErrors.inc({ node: node.id });
      ctx.pool.reportFailure(
        node.id,
        this.timedOut ? 'websocket handshake timed out' : err.message,
      );
      this.fail('relay-unreachable', {
        status: this.timedOut ? 504 : 502,
        type: this.timedOut ? 'gateway-timeout' : 'bad-gateway',
        detail: `relay node ${node.id} could not be reached`,
      });
      return;
    }
    // A handshake the relay got wrong: answered, but not proof that the relay is down.
    ctx.log.warn({ node: node.id, err }, 'websocket handshake with the relay failed');
    this.fail('relay-failed', {
      status: 502,
      type: 'bad-gateway',
      detail: `relay node ${node.id} did not complete the WebSocket handshake`,
    });
  }

  /** The relay socket is open: complete the client's handshake, or close the relay socket. */
  private accept(
    upstream: WebSocket,
    node: UpstreamState,
    who: { ip: string; apiKey?: string },
  ): void {
    const { ctx, wss, connections, writes } = this.state;
    clearTimeout(this.timer);
    if (this.settled) return this.abandon();
    this.socket.off('close', this.onClientClose);
    const release = this.releaseSlot;
    // ws answers a refused handshake itself (a client gone, a server closing) without calling
    // back: then the relay socket must not outlive it.
    wss.handleUpgrade(this.req, this.socket, this.head, (client) => {
      this.settled = true;
      ctx.metrics.openWebSockets.inc();
      const info = { ...who, nodeId: node.id };
      const held = { writes, socket: this.socket, upstream: this.upstreamSocket };
      const conn = new ProxiedConnection(client, upstream, ctx, info, held, () => {
        release?.();
        if (connections.delete(conn)) ctx.metrics.openWebSockets.dec();
      });
      connections.add(conn);
    });
    if (!this.settled) {
      ctx.metrics.upgradesRefused.inc({ reason: 'client-gone' });
      this.abandon();
    }
  }
}
