import { FleetPresence } from '../quota/fleet-presence.js';
import { longestWindowMs } from '../quota/credit.js';
import type { Presence } from '../quota/credit.js';
import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import Fastify, { LogController } from 'fastify';
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import type { Registry } from 'prom-client';
import type { GatewayConfig } from '../config/schema.js';
import { MultiplierBoard } from '../pressure/follower/board.js';
import { QuotaDecider } from '../quota/decider.js';
import { workerCount } from './cluster-messages.js';
import { Policy } from '../quota/policy.js';
import { loadPubkeyTiers } from '../quota/pubkey-tiers.js';
import { createStore, parseNodeAddress } from '../store/index.js';
import type { Store } from '../store/index.js';
import { Admission } from './admission.js';
import { buildAdminApp } from './admin.js';
import { ClientAddress } from './client-address.js';
import type { GatewayContext } from './context.js';
import { registerHttpProxy } from './http-proxy.js';
import { GatewayMetrics } from './metrics.js';
import { HandedConnections } from './handed-connections.js';
import { UpstreamPool } from './upstreams.js';
import { PressureFollower } from '../pressure/follower/follower.js';
import { AdmittedTally } from '../pressure/budget/admitted-tally.js';
import { LearnedBudgets } from '../pressure/budget/learned.js';
import { initSignatureVerifier } from '../nostr/verify.js';
import { attachWebSocketProxy } from './ws-proxy.js';
import { startTrustGraph } from './trust.js';

export interface RunningGateway {
  /** Empty in a cluster worker: the primary holds the public listener. */
  url: string;
  /** Empty in a cluster worker: the primary holds the admin listener. */
  adminUrl: string;
  /** Serve a client socket the cluster primary accepted (a worker only); `head` was read first. */
  accept(socket: Socket, head?: Buffer): void;
  /** Answer one admin request in process (a cluster worker's admin routes, over IPC). */
  injectAdmin(request: AdminRequest): Promise<AdminResponse>;
  /** The registry /metrics shows, for prom-client's cluster aggregator. */
  metricsRegistry: Registry;
  /**
   * Apply a reloaded configuration: policy, tiers, allow-list, pubkey tiers (listeners and
   * Valkey stay). Throws, applying nothing, when a pubkey file does not read.
   */
  reload(config: GatewayConfig): void;
  /** Stop accepting, close WebSockets with 1001, finish in-flight requests, close Valkey. */
  close(): Promise<void>;
  /** Log and count (sluice_internal_errors_total) an error that escaped every handler. */
  internalError(where: string, err: unknown): void;
}

export interface AdminRequest {
  method: string;
  url: string;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

export interface AdminResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** A gateway wired and ready but listening nowhere: its apps answer `inject()` in process. */
export interface BuiltGateway {
  /** The public app: the HTTP proxy (and, once listening, WebSocket upgrades on its server). */
  app: FastifyInstance;
  admin: FastifyInstance;
  ctx: GatewayContext;
  /** Stop health checks, the pressure follower and Valkey, and close both apps. */
  close(): Promise<void>;
}

/**
 * Wire the gateway from a validated configuration: Valkey, policy, board, pool, follower and
 * both apps, listening nowhere yet.
 */
export async function buildGateway(
  config: GatewayConfig,
  log: FastifyBaseLogger,
): Promise<BuiltGateway> {
  const address = new ClientAddress(config.trustedProxies, {
    ipv6PrefixLength: config.identity.ipv6PrefixLength,
  });
  // Once per process, before anything that would need closing: libsecp256k1 in WebAssembly
  // checks signatures from the first frame on.
  await initSignatureVerifier();
  // Before Valkey: a bad pubkey file is a configuration error (file and line) at start.
  const pubkeyTiers = loadPubkeyTiers(config.identity.pubkeyTiers);
  const store = await createStore(storeOptionsOf(config));
  const policy = new Policy(config.quotas);
  policy.setPubkeyTiers(pubkeyTiers);
  const board = new MultiplierBoard(config.upstreams.map((u) => u.id));
  const pool = new UpstreamPool(config.upstreams, config.routing, config.healthCheck, log, {
    headroom: (id) => board.headroom(id),
  });
  const metrics = new GatewayMetrics(board, pool);
  const trust = startTrustGraph(config, policy, metrics, log);
  // Pressure on: each node's write budget is learned by its feed (pressure/budget).
  const learned = config.pressure.enabled ? new LearnedBudgets() : undefined;
  // Every gateway process with quotas on says it is there, so that one alone may give credit:
  // under the quotas' key in force (a reload may move them, or turn them on).
  const presence = new FleetPresence(store.presence, {
    key: () => (ctx.config.quotas.enabled ? `${ctx.config.quotas.keyPrefix}:presence` : undefined),
    longestWindowMs: () => longestWindowMs(ctx.config.quotas),
    onError: (err) => log.debug({ err }, 'gateway presence heartbeat failed'),
  });
  const decider = createDecider({ config, store, policy, board, metrics, log, learned, presence });
  const admittedTally = createAdmittedTally(config, store, log);
  const services = {
    config,
    store,
    policy,
    decider,
    pool,
    metrics,
    log,
    board,
    ...(admittedTally ? { admittedTally } : {}),
  };
  const ctx: GatewayContext = { ...services, address, admission: new Admission(services) };
  if (config.pressure.avoidEmergency) pool.avoid((id) => board.get(id).emergency === true);

  await presence.start();
  await pool.start();
  const pressure = createPressureFollower({ config, store, board, metrics, log, learned });
  await pressure?.start();
  admittedTally?.start();
  const app = buildPublicApp(config, log);
  await registerHttpProxy(app, ctx);
  const admin = buildAdminApp(ctx);
  return {
    app,
    admin,
    ctx,
    async close() {
      trust?.stop();
      presence.stop();
      pool.stop();
      await Promise.allSettled([app.close(), admin.close(), pressure?.stop()]);
      await admittedTally?.stop().catch(() => undefined);
      // Unspent leased points go back before the connection closes.
      await decider.close();
      await store.close();
    },
  };
}

/** What the gateway's parts are built from. */
interface Parts {
  config: GatewayConfig;
  store: Store;
  board: MultiplierBoard;
  metrics: GatewayMetrics;
  log: FastifyBaseLogger;
  learned: LearnedBudgets | undefined;
}

function storeOptionsOf(config: GatewayConfig) {
  return {
    client: config.valkey.client,
    mode: config.valkey.mode,
    nodes: config.valkey.nodes.map(parseNodeAddress),
    timeouts: {
      connectMs: config.valkey.connectTimeoutMs,
      commandMs: config.valkey.commandTimeoutMs,
    },
    inflightLimit: config.valkey.inflightLimit,
    clientName: 'sluice-gateway',
  };
}

function createDecider({
  config,
  store,
  policy,
  board,
  metrics,
  log,
  learned,
  presence,
}: Parts & { policy: Policy; presence: Presence }) {
  const callOk = metrics.valkeyCall.labels({ client: store.client, result: 'ok' });
  const callFailed = metrics.valkeyCall.labels({ client: store.client, result: 'error' });
  return new QuotaDecider(store, policy, board, config.quotas, {
    observer: { storeCall: (seconds, ok) => (ok ? callOk : callFailed).observe(seconds) },
    maxTrackedClients: config.limits.maxTrackedClients,
    workers: workerCount(config.workers),
    onLeasePoints: (event, points) => metrics.countLeasePoints(event, points),
    onLeaseReturnFailed: (err) => log.warn({ err }, 'quota lease hand-back failed'),
    writeBudgets: new Map(
      config.upstreams.flatMap((u) => (u.writeBudget ? [[u.id, u.writeBudget] as const] : [])),
    ),
    ...(learned ? { learnedBudgets: learned } : {}),
    nodeCount: config.upstreams.length,
    presence,
  });
}

/** Pressure on: every write forwarded is tallied per node, batched to Valkey for the feeds. */
function createAdmittedTally(config: GatewayConfig, store: Store, log: FastifyBaseLogger) {
  if (!config.pressure.enabled) return undefined;
  return new AdmittedTally(
    store.admitted,
    config.upstreams.map((u) => u.id),
    (err) => log.debug({ err }, 'adding admitted writes for the feeds failed'),
  );
}

function createPressureFollower({ config, store, board, metrics, log, learned }: Parts) {
  if (!config.pressure.enabled) return undefined;
  return new PressureFollower(
    config.pressure,
    board,
    store,
    log,
    (s) => metrics.propagation.observe(s),
    Date.now,
    learned,
  );
}

function buildPublicApp(config: GatewayConfig, log: FastifyBaseLogger): FastifyInstance {
  return Fastify({
    loggerInstance: log,
    logController: new LogController({ disableRequestLogging: !config.logging.requests }),
    // Bodies are streamed, never parsed, so this bounds nothing but the in-memory cases.
    bodyLimit: config.limits.maxBodyBytes,
    return503OnClosing: true,
    forceCloseConnections: 'idle',
    ...listenerTimeouts(config.limits),
  });
}

/**
 * Build the gateway and start both listeners. A cluster worker starts neither: the primary
 * holds both ports, hands it client sockets (`accept`) and asks its admin routes over IPC.
 */
export async function startGateway(
  config: GatewayConfig,
  log: FastifyBaseLogger,
  options: { worker?: boolean } = {},
): Promise<RunningGateway> {
  const worker = options.worker ?? false;
  const built = await buildGateway(config, log);
  const { app, admin, ctx } = built;
  const ws = attachWebSocketProxy(app.server, ctx);
  const handed = worker ? handedConnections(app, config) : undefined;
  try {
    await listenOrReady(built, config, worker);
  } catch (err) {
    await built.close();
    throw err;
  }
  return {
    url: worker ? '' : listenUrl(app.server, config.listen.host),
    adminUrl: worker ? '' : listenUrl(admin.server, config.admin.host),
    metricsRegistry: ctx.metrics.registry,
    accept(socket, head) {
      if (!handed) throw new Error('only a cluster worker is handed connections');
      handed.accept(socket, head);
    },
    injectAdmin: (request) => injectAdmin(admin, request),
    internalError(where, err) {
      ctx.metrics.internalErrors.inc({ where });
      log.error({ err, where }, 'internal error caught by the last-resort handler');
    },
    reload: (next) => reloadContext(ctx, next),
    async close() {
      ws.closeAll('gateway shutting down');
      await built.close();
    },
  };
}

/**
 * A worker's public connections (handed over by the primary). Node's own close waits only for
 * the connections its server accepted: these are drained in preClose, once new requests are
 * answered 503 and before the proxy's relay connections close (onClose), as Node would.
 */
function handedConnections(app: FastifyInstance, config: GatewayConfig): HandedConnections {
  const handed = new HandedConnections(app.server);
  app.addHook('preClose', () => handed.drain(Math.max(0, config.shutdownGraceMs - 1000)));
  return handed;
}

async function listenOrReady(built: BuiltGateway, config: GatewayConfig, worker: boolean) {
  if (worker) {
    await Promise.all([built.app.ready(), built.admin.ready()]);
    return;
  }
  await built.app.listen({ host: config.listen.host, port: config.listen.port });
  await built.admin.listen({ host: config.admin.host, port: config.admin.port });
}

async function injectAdmin(admin: FastifyInstance, request: AdminRequest): Promise<AdminResponse> {
  const res = await admin.inject({
    method: request.method as 'GET',
    url: request.url,
    headers: request.headers,
    ...(request.body ? { payload: request.body } : {}),
  });
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(res.headers)) {
    if (value !== undefined) headers[name] = String(value);
  }
  return { status: res.statusCode, headers, body: res.body };
}

/** Policy, tiers, allow-list and pubkey tiers from a reloaded configuration (listeners and Valkey stay). */
function reloadContext(ctx: GatewayContext, next: GatewayConfig): void {
  // First: a bad file throws here, and the running configuration stays whole.
  const pubkeyTiers = loadPubkeyTiers(next.identity.pubkeyTiers);
  ctx.config = {
    ...ctx.config,
    quotas: next.quotas,
    identity: { ...next.identity, keySalt: ctx.config.identity.keySalt },
  };
  ctx.policy.reload(next.quotas);
  ctx.policy.setPubkeyTiers(pubkeyTiers);
  ctx.decider.reload(next.quotas);
}

/**
 * Bounds on what a client may hold on the public listener: slow headers, a slow or abandoned
 * body (408, closed; its upstream request is cancelled), an idle keep-alive connection. Node
 * enforces the first two on a sweep over its connections: sweep often enough to keep the bound.
 */
function listenerTimeouts(limits: GatewayConfig['limits']) {
  const { headersTimeoutMs, requestTimeoutMs, keepAliveTimeoutMs } = limits;
  return {
    requestTimeout: requestTimeoutMs,
    keepAliveTimeout: keepAliveTimeoutMs,
    http: {
      headersTimeout: headersTimeoutMs,
      requestTimeout: requestTimeoutMs,
      connectionsCheckingInterval: Math.max(50, Math.min(1000, headersTimeoutMs / 4)),
    },
  };
}

function listenUrl(server: Server, host: string): string {
  const addr = server.address();
  const port = typeof addr === 'object' && addr ? addr.port : 0;
  return `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
}
