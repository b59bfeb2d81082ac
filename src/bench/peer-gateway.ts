import type { AddressInfo } from 'node:net';
import rateLimit from '@fastify/rate-limit';
import replyFrom from '@fastify/reply-from';
import Fastify from 'fastify';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Cluster, Redis } from 'ioredis';
import { UPSTREAM_POOL, boundedBody } from '../gateway/upstream-io.js';
import { parseNodeAddress } from '../store/options.js';
import { withinDeadline } from '../util/deadline.js';

/**
 * The peer baseline of the benchmarks: what a user would otherwise put in front of a relay.
 * A Fastify reverse proxy (@fastify/reply-from) whose writes go through @fastify/rate-limit
 * with its Redis store (an ioredis client, standalone or cluster) on the same Valkey as
 * sluice. Per client IP, fixed window, no pressure adaptation, no WebSocket.
 */
export interface PeerGatewayOptions {
  host: string;
  port: number;
  /** Base URL of the relay, e.g. http://127.0.0.1:7001. */
  upstream: string;
  valkey: { mode: 'standalone' | 'cluster'; nodes: string[] /* host:port */ };
  /** Writes per client per window. */
  points: number;
  windowSec: number;
  /** Peers whose X-Forwarded-For is believed (Fastify trustProxy); [] believes nobody. */
  trustedProxies: string[];
  commandTimeoutMs: number;
  maxBodyBytes: number;
  /** Admit when Valkey fails (the plugin's default is false: the request fails with 500). */
  skipOnError?: boolean;
  /** Key prefix in Valkey (the plugin's default is "fastify-rate-limit-"). */
  nameSpace?: string;
  connectTimeoutMs?: number;
}

export interface RunningPeerGateway {
  url: string;
  /** What the proxy, the plugin and the Valkey client were given, for the results. */
  settings: Record<string, unknown>;
  /** Stop accepting, finish in-flight requests, then close the Valkey client. */
  close(): Promise<void>;
}

/** Methods that change state: counted against the client's quota. Everything else is free. */
export const LIMITED_METHODS = ['POST', 'PUT', 'PATCH', 'DELETE'] as const;
const FREE_METHODS = ['GET', 'HEAD', 'OPTIONS'] as const;
const QUIT_TIMEOUT_MS = 1000;

type IoClient = Redis | Cluster;

function createClient(opts: PeerGatewayOptions, connectTimeoutMs: number) {
  const nodes = opts.valkey.nodes.map(parseNodeAddress);
  if (nodes.length === 0) throw new Error('peer gateway: no Valkey nodes given');
  const nodeOptions = {
    lazyConnect: true,
    connectTimeout: connectTimeoutMs,
    commandTimeout: opts.commandTimeoutMs,
    // As the sluice gateway's ioredis: one retry per command, reconnect with a short backoff.
    maxRetriesPerRequest: 1,
    retryStrategy: (times: number) => Math.min(50 * 2 ** times, 1000),
    connectionName: 'sluice-peer',
  };
  const client: IoClient =
    opts.valkey.mode === 'cluster'
      ? new Cluster(nodes, {
          lazyConnect: true,
          enableAutoPipelining: false,
          scaleReads: 'master',
          slotsRefreshTimeout: connectTimeoutMs,
          redisOptions: nodeOptions,
        })
      : new Redis({ ...nodeOptions, ...nodes[0]!, enableAutoPipelining: false });
  const settings = {
    client: 'ioredis',
    mode: opts.valkey.mode,
    nodes: opts.valkey.nodes,
    commandTimeoutMs: nodeOptions.commandTimeout,
    connectTimeoutMs: nodeOptions.connectTimeout,
    maxRetriesPerRequest: nodeOptions.maxRetriesPerRequest,
    autoPipelining: false,
    ...(opts.valkey.mode === 'cluster' ? { scaleReads: 'master' } : {}),
  };
  return { client, settings };
}

async function connect(client: IoClient, timeoutMs: number, what: string): Promise<void> {
  let lastError: unknown;
  client.on('error', (err: unknown) => {
    lastError = err;
  });
  const ready = (async () => {
    await client.connect();
    await client.ping();
  })();
  try {
    await withinDeadline(
      ready,
      timeoutMs,
      () => new Error(`cannot connect ${what} within ${timeoutMs} ms`),
    );
  } catch (err) {
    client.disconnect();
    const cause = lastError instanceof Error ? `: ${lastError.message}` : '';
    throw new Error(`peer gateway: ${(err as Error).message}${cause}`, { cause: err });
  }
}

export async function startPeerGateway(opts: PeerGatewayOptions): Promise<RunningPeerGateway> {
  const upstream = new URL(opts.upstream);
  const connectTimeoutMs = opts.connectTimeoutMs ?? 2000;
  const { client, settings: clientSettings } = createClient(opts, connectTimeoutMs);
  await connect(client, connectTimeoutMs, `${opts.valkey.mode} ${opts.valkey.nodes.join(',')}`);

  const plugin = {
    max: opts.points,
    timeWindow: opts.windowSec * 1000,
    nameSpace: opts.nameSpace ?? 'fastify-rate-limit-',
    skipOnError: opts.skipOnError ?? false,
    hook: 'onRequest' as const,
    global: true,
  };
  const app = Fastify({
    logger: false,
    trustProxy: opts.trustedProxies.length > 0 ? opts.trustedProxies : false,
    bodyLimit: opts.maxBodyBytes,
    return503OnClosing: true,
    forceCloseConnections: 'idle',
  });

  try {
    await app.register(replyFrom, {
      base: upstream.origin,
      undici: UPSTREAM_POOL,
      disableRequestLogging: true,
    });
    // Bodies stream to the relay as they arrive, as in the sluice gateway.
    app.removeAllContentTypeParsers();
    app.addContentTypeParser('*', (_req, payload, done) => {
      done(null, payload.pipe(boundedBody(opts.maxBodyBytes)));
    });

    const proxy = async (request: FastifyRequest, reply: FastifyReply) => {
      if (Number(request.headers['content-length'] ?? 0) > opts.maxBodyBytes) {
        return reply.code(413).send({ error: `bodies are limited to ${opts.maxBodyBytes} bytes` });
      }
      return reply.from(request.url);
    };

    // Reads are free: routes outside the plugin's scope.
    for (const url of ['/', '/*']) {
      app.route({ method: [...FREE_METHODS], url, exposeHeadRoute: false, handler: proxy });
    }
    // Writes: the plugin is registered in their own encapsulated scope, so with `global: true`
    // it hooks every route there and no other (the maintainers' advice for limiting a subset
    // of routes). One counter per client IP across all write methods and paths.
    await app.register(async (writes) => {
      await writes.register(rateLimit, { ...plugin, redis: client });
      for (const url of ['/', '/*']) {
        writes.route({ method: [...LIMITED_METHODS], url, handler: proxy });
      }
    });

    await app.listen({ host: opts.host, port: opts.port });
  } catch (err) {
    await app.close().catch(() => undefined);
    client.disconnect();
    throw err;
  }

  const { port } = app.server.address() as AddressInfo;
  const url = `http://${opts.host.includes(':') ? `[${opts.host}]` : opts.host}:${port}`;
  const settings: Record<string, unknown> = {
    implementation: 'fastify-rate-limit',
    ...clientSettings,
    plugin: '@fastify/rate-limit',
    store: 'RedisStore (one EVALSHA per write: INCR, PEXPIRE or PTTL)',
    max: plugin.max,
    timeWindowMs: plugin.timeWindow,
    nameSpace: plugin.nameSpace,
    skipOnError: plugin.skipOnError,
    hook: plugin.hook,
    keyGenerator: 'default (request.ip)',
    limitedMethods: [...LIMITED_METHODS],
    trustedProxies: opts.trustedProxies,
    maxBodyBytes: opts.maxBodyBytes,
    proxy: '@fastify/reply-from',
    undici: UPSTREAM_POOL,
    upstream: upstream.origin,
  };

  let closing: Promise<void> | undefined;
  return {
    url,
    settings,
    close: () =>
      (closing ??= (async () => {
        try {
          await app.close();
        } finally {
          // QUIT waits for a connection; with Valkey gone, give up on it after a second.
          let timer: NodeJS.Timeout | undefined;
          await Promise.race([
            client.quit().catch(() => undefined),
            new Promise((resolve) => (timer = setTimeout(resolve, QUIT_TIMEOUT_MS))),
          ]);
          clearTimeout(timer);
          client.disconnect();
        }
      })()),
  };
}
