import { GlideClient, GlideClusterClient, Logger as GlideLogger } from '@valkey/valkey-glide';
import { coalesceGlideWrites } from './glide-writes.js';
import { Redis as IoRedis, Cluster as IoRedisCluster } from 'ioredis';
import { Redis as IoValkey, Cluster as IoValkeyCluster } from 'iovalkey';
import { StoreConnectError, describeError } from './errors.js';
import type { StoreOptions } from './options.js';
import { withinDeadline } from '../util/deadline.js';

export type GlideAny = GlideClient | GlideClusterClient;
export type IoAny = IoRedis | IoRedisCluster | IoValkey | IoValkeyCluster;

/** A connected client of one of the three kinds. */
export type RawClient =
  | { kind: 'valkey-glide'; client: GlideAny }
  | { kind: 'ioredis'; client: IoRedis | IoRedisCluster }
  | { kind: 'iovalkey'; client: IoValkey | IoValkeyCluster };

/** The lifecycle calls shared by ioredis and iovalkey, standalone and cluster. */
interface IoLifecycle {
  connect(): Promise<void>;
  ping(): Promise<string>;
  quit(): Promise<unknown>;
  disconnect(): void;
  on(event: 'error', listener: (err: unknown) => void): unknown;
}

/** The settings in force, as passed to the client library (recorded by benchmarks). */
export type EffectiveSettings = Record<string, string | number | boolean | null>;

export interface Connected {
  raw: RawClient;
  settings: EffectiveSettings;
}

/** A channel to listen on from the moment the client connects. */
export interface ChannelListener {
  channel: string;
  onMessage(message: string): void;
}

/**
 * Create and connect a client; fails with StoreConnectError within timeouts.connectMs.
 * With a listener the client is a subscriber: glide takes subscriptions at creation, and
 * ioredis / iovalkey connections in subscriber mode cannot run other commands.
 */
export async function connectClient(
  opts: StoreOptions,
  listener?: ChannelListener,
): Promise<Connected> {
  if (opts.client === 'valkey-glide') return connectGlide(opts, listener);
  const connected = await connectIo(opts.client, opts);
  if (listener) {
    const client = connected.raw.client as unknown as IoSubscriber;
    client.on('message', (channel: string, message: string) => {
      if (channel === listener.channel) listener.onMessage(message);
    });
    try {
      await client.subscribe(listener.channel);
    } catch (err) {
      client.disconnect();
      throw new StoreConnectError(`cannot subscribe to ${listener.channel}: ${describeError(err)}`);
    }
  }
  return connected;
}

interface IoSubscriber {
  on(event: 'message', listener: (channel: string, message: string) => void): unknown;
  subscribe(channel: string): Promise<unknown>;
  disconnect(): void;
}

function target(opts: StoreOptions): string {
  const nodes = opts.nodes.map((n) => `${n.host}:${n.port}`).join(',');
  return `${opts.client} (${opts.mode}) to ${nodes}`;
}

let glideLoggerSet = false;

async function connectGlide(opts: StoreOptions, listener?: ChannelListener): Promise<Connected> {
  if (!glideLoggerSet) {
    // Glide's core logs warnings to stdout by default, including the "Function not found"
    // that our reload handles; errors still surface as thrown StoreErrors.
    GlideLogger.setLoggerConfig(process.env.SLUICE_GLIDE_LOG === 'warn' ? 'warn' : 'error');
    glideLoggerSet = true;
  }
  const config = {
    addresses: opts.nodes.map((n) => ({ host: n.host, port: n.port })),
    requestTimeout: opts.timeouts.commandMs,
    inflightRequestsLimit: opts.inflightLimit,
    clientName: opts.clientName,
    advancedConfiguration: { connectionTimeout: opts.timeouts.connectMs },
    ...(listener
      ? {
          pubsubSubscriptions: {
            // Exact channel names: mode 0 in both the standalone and the cluster enums.
            channelsAndPatterns: { 0: new Set([listener.channel]) },
            callback: (msg: { message: unknown; channel: unknown }) => {
              if (String(msg.channel) === listener.channel) listener.onMessage(String(msg.message));
            },
          },
        }
      : {}),
  };
  const pending: Promise<GlideAny> =
    opts.mode === 'cluster'
      ? GlideClusterClient.createClient(config)
      : GlideClient.createClient(config);
  const client = await withDeadline(pending, opts.timeouts.connectMs, target(opts), (late) =>
    late.close(),
  );
  const coalesced = coalesceGlideWrites(client);
  return {
    raw: { kind: 'valkey-glide', client },
    settings: {
      client: 'valkey-glide',
      mode: opts.mode,
      requestTimeoutMs: config.requestTimeout,
      connectionTimeoutMs: opts.timeouts.connectMs,
      inflightRequestsLimit: config.inflightRequestsLimit,
      autoPipelining: coalesced ? 'writes coalesced per event-loop turn' : 'n/a (multiplexed)',
      protocol: 'RESP3',
      readFrom: 'primary',
    },
  };
}

async function connectIo(kind: 'ioredis' | 'iovalkey', opts: StoreOptions): Promise<Connected> {
  const nodeOptions = {
    lazyConnect: true,
    connectTimeout: opts.timeouts.connectMs,
    commandTimeout: opts.timeouts.commandMs,
    // One retry at most per command: a quota decision must fail fast, not queue for seconds.
    maxRetriesPerRequest: 1,
    connectionName: opts.clientName,
    retryStrategy: (times: number) => Math.min(50 * 2 ** times, 1000),
  };
  const clusterOptions = {
    lazyConnect: true,
    scaleReads: 'master' as const, // counters are read after write: never from a replica
    enableAutoPipelining: opts.autoPipelining,
    slotsRefreshTimeout: opts.timeouts.connectMs,
    redisOptions: nodeOptions,
  };
  const standaloneOptions = {
    ...nodeOptions,
    host: opts.nodes[0]!.host,
    port: opts.nodes[0]!.port,
    enableAutoPipelining: opts.autoPipelining,
  };
  const raw: RawClient =
    kind === 'ioredis'
      ? {
          kind,
          client:
            opts.mode === 'cluster'
              ? new IoRedisCluster(opts.nodes, clusterOptions)
              : new IoRedis(standaloneOptions),
        }
      : {
          kind,
          client:
            opts.mode === 'cluster'
              ? new IoValkeyCluster(opts.nodes, clusterOptions)
              : new IoValkey(standaloneOptions),
        };
  const client = raw.client as unknown as IoLifecycle;
  // Keep the last connection error for the message; without a listener ioredis logs to stderr.
  let lastError: unknown;
  client.on('error', (err: unknown) => {
    lastError = err;
  });
  try {
    await withDeadline(client.connect(), opts.timeouts.connectMs, target(opts));
    await withDeadline(client.ping(), opts.timeouts.connectMs, target(opts));
  } catch (err) {
    client.disconnect();
    const cause = lastError ? `: ${describeError(lastError)}` : '';
    throw err instanceof StoreConnectError
      ? new StoreConnectError(`${err.message}${cause}`)
      : new StoreConnectError(`cannot connect ${target(opts)}: ${describeError(err)}${cause}`);
  }
  return {
    raw,
    settings: {
      client: kind,
      mode: opts.mode,
      commandTimeoutMs: nodeOptions.commandTimeout,
      connectTimeoutMs: nodeOptions.connectTimeout,
      inflightRequestsLimit: null, // not supported by ioredis / iovalkey
      maxRetriesPerRequest: nodeOptions.maxRetriesPerRequest,
      autoPipelining: opts.autoPipelining,
      protocol: kind === 'ioredis' ? 'RESP3' : 'RESP2',
      readFrom: 'primary',
    },
  };
}

/**
 * Race a connection attempt against a deadline. A client that connects after the deadline
 * is handed to `lateCleanup` so it does not keep the process alive.
 */
async function withDeadline<T>(
  pending: Promise<T>,
  ms: number,
  what: string,
  lateCleanup?: (late: T) => void,
): Promise<T> {
  try {
    return await withinDeadline(
      pending,
      ms,
      () => new StoreConnectError(`cannot connect ${what} within ${ms} ms`),
    );
  } catch (err) {
    if (lateCleanup) pending.then(lateCleanup, () => undefined);
    if (err instanceof StoreConnectError) throw err;
    throw new StoreConnectError(`cannot connect ${what}: ${describeError(err)}`);
  }
}

export async function pingClient(raw: RawClient): Promise<void> {
  if (raw.kind === 'valkey-glide') await raw.client.ping();
  else await (raw.client as unknown as IoLifecycle).ping();
}

export async function closeClient(raw: RawClient): Promise<void> {
  if (raw.kind === 'valkey-glide') {
    // Close the client only: the limiter's close() would FUNCTION DELETE the shared libraries
    // that every other gateway on this Valkey relies on.
    raw.client.close();
    return;
  }
  const client = raw.client as unknown as IoLifecycle;
  try {
    await client.quit();
  } catch {
    client.disconnect();
  }
}
