/**
 * What ioredis and iovalkey share (iovalkey is ioredis' fork): one driver for either, given
 * its classes. EVALSHA with EVAL when a script is not cached; auto-pipelining per tick.
 */
import { coalesceClientWrites } from './io-writes.js';
import type { IoClientLike } from './io-writes.js';
import type { RateLimiterStoreAbstract } from 'rate-limiter-flexible';
import { StoreConnectError, describeError, storeCall as wrap } from '../errors.js';
import type { KeyValue } from '../kv.js';
import { LEASE_COMMANDS } from '../lease.js';
import type { NodeAddress } from '../options.js';
import { target, withDeadline } from './driver.js';
import type { ClientDriver, StoreLimiterOptions } from './driver.js';

/** The calls the store makes of an ioredis / iovalkey client, standalone or cluster. */
interface IoClient {
  connect(): Promise<void>;
  ping(): Promise<string>;
  quit(): Promise<unknown>;
  disconnect(): void;
  on(event: 'error', listener: (err: unknown) => void): unknown;
  on(event: 'message', listener: (channel: string, message: string) => void): unknown;
  subscribe(channel: string): Promise<unknown>;
  set(key: string, value: string, px?: 'PX', ms?: number, nx?: 'NX'): Promise<unknown>;
  del(key: string): Promise<number>;
  get(key: string): Promise<string | null>;
  publish(channel: string, message: string): Promise<number>;
  defineCommand(name: string, def: { lua: string }): void;
}

/** One library of the family: its classes and the protocol it speaks. */
export interface IoLibrary {
  Standalone: new (options: never) => unknown;
  Cluster: new (nodes: NodeAddress[], options: never) => unknown;
  Limiter: new (opts: StoreLimiterOptions & { storeClient: unknown }) => RateLimiterStoreAbstract;
  protocol: 'RESP2' | 'RESP3';
}

export function ioDriver(lib: IoLibrary): ClientDriver {
  return {
    async connect(opts, listener) {
      const nodeOptions = {
        lazyConnect: true,
        connectTimeout: opts.timeouts.connectMs,
        commandTimeout: opts.timeouts.commandMs,
        // One retry at most per command: a quota decision must fail fast, not queue for seconds.
        maxRetriesPerRequest: 1,
        connectionName: opts.clientName,
        retryStrategy: (times: number) => Math.min(50 * 2 ** times, 1000),
      };
      // Lease takes go on their own: sparse, each in a pipeline of one would cost more (lease.ts).
      const autoPipeliningIgnoredCommands = [...LEASE_COMMANDS];
      const clusterOptions = {
        lazyConnect: true,
        scaleReads: 'master' as const, // counters are read after write: never from a replica
        enableAutoPipelining: opts.autoPipelining,
        autoPipeliningIgnoredCommands,
        slotsRefreshTimeout: opts.timeouts.connectMs,
        redisOptions: nodeOptions,
      };
      const standaloneOptions = {
        ...nodeOptions,
        host: opts.nodes[0]!.host,
        port: opts.nodes[0]!.port,
        enableAutoPipelining: opts.autoPipelining,
        autoPipeliningIgnoredCommands,
      };
      const client = (
        opts.mode === 'cluster'
          ? new lib.Cluster(opts.nodes, clusterOptions as never)
          : new lib.Standalone(standaloneOptions as never)
      ) as IoClient;
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
      if (opts.autoPipelining) coalesceClientWrites(client as unknown as IoClientLike);
      if (listener) {
        // A connection in subscriber mode runs no other command: this one only listens.
        client.on('message', (channel: string, message: string) => {
          if (channel === listener.channel) listener.onMessage(message);
        });
        try {
          await client.subscribe(listener.channel);
        } catch (err) {
          client.disconnect();
          throw new StoreConnectError(
            `cannot subscribe to ${listener.channel}: ${describeError(err)}`,
          );
        }
      }
      return {
        settings: {
          client: opts.client,
          mode: opts.mode,
          commandTimeoutMs: nodeOptions.commandTimeout,
          connectTimeoutMs: nodeOptions.connectTimeout,
          inflightRequestsLimit: null, // not supported by ioredis / iovalkey
          maxRetriesPerRequest: nodeOptions.maxRetriesPerRequest,
          autoPipelining: opts.autoPipelining,
          protocol: lib.protocol,
          readFrom: 'primary',
        },
        limiter: (common) => new lib.Limiter({ ...common, storeClient: client }),
        kv: ioKeyValue(client),
        scripts(lua) {
          // EVALSHA, with EVAL when the script is not cached (after a restart or a failover).
          // No numberOfKeys: each call gives its own count first.
          for (const [name, code] of Object.entries<string>(lua)) {
            client.defineCommand(name, { lua: code });
          }
          const commands = client as unknown as Record<
            string,
            (numberOfKeys: number, ...keysAndArgs: string[]) => Promise<unknown>
          >;
          return (name, keys, args) => commands[name]!(keys.length, ...keys, ...args);
        },
        ping: () => client.ping(),
        async close() {
          try {
            await client.quit();
          } catch {
            client.disconnect();
          }
        },
      };
    },
  };
}

function ioKeyValue(c: IoClient): KeyValue {
  return {
    setWithLease: (key, value, pxMs) =>
      wrap('SET', async () => {
        await c.set(key, value, 'PX', pxMs);
      }),
    set: (key, value) =>
      wrap('SET', async () => {
        await c.set(key, value);
      }),
    get: (key) => wrap('GET', () => c.get(key)),
    claim: (key, value, pxMs) =>
      wrap('SET NX', async () => (await c.set(key, value, 'PX', pxMs, 'NX')) !== null),
    del: (key) =>
      wrap('DEL', async () => {
        await c.del(key);
      }),
    publish: (channel, message) => wrap('PUBLISH', () => c.publish(channel, message)),
  };
}
