/** The valkey-glide driver: GlideClient / GlideClusterClient and RateLimiterValkeyGlide. */
import {
  GlideClient,
  GlideClusterClient,
  Logger as GlideLogger,
  Script as GlideScript,
  TimeUnit,
} from '@valkey/valkey-glide';
import { RateLimiterValkeyGlide } from 'rate-limiter-flexible';
import { describeError, storeCall as wrap } from '../errors.js';
import type { KeyValue } from '../kv.js';
import type { StoreOptions } from '../options.js';
import { coalesceGlideWrites } from './glide-writes.js';
import { target, withDeadline } from './driver.js';
import type { ChannelListener, ClientDriver, EffectiveSettings } from './driver.js';

export type GlideAny = GlideClient | GlideClusterClient;

let glideLoggerSet = false;

/**
 * A connected glide client and its settings. Glide takes subscriptions at creation: with a
 * listener the client listens on its channel from the start.
 */
export async function openGlide(
  opts: StoreOptions,
  listener?: ChannelListener,
): Promise<{ client: GlideAny; settings: EffectiveSettings }> {
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
    client,
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

export const driver: ClientDriver = {
  async connect(opts, listener) {
    const { client, settings } = await openGlide(opts, listener);
    return {
      settings,
      limiter: (common) =>
        reloadFunctionsWhenMissing(new RateLimiterValkeyGlide({ ...common, storeClient: client })),
      kv: glideKeyValue(client),
      scripts(lua) {
        const loaded = new Map(
          Object.entries<string>(lua).map(([name, code]) => [name, new GlideScript(code)]),
        );
        return (name, keys, args) =>
          client.invokeScript(loaded.get(name)!, { keys: [...keys], args: [...args] });
      },
      ping: () => client.ping(),
      // Close the client only: the limiter's close() would FUNCTION DELETE the shared
      // libraries that every other gateway on this Valkey relies on.
      close() {
        client.close();
        return Promise.resolve();
      },
    };
  },
};

function glideKeyValue(c: GlideAny): KeyValue {
  return {
    setWithLease: (key, value, pxMs) =>
      wrap('SET', async () => {
        await c.set(key, value, { expiry: { type: TimeUnit.Milliseconds, count: pxMs } });
      }),
    set: (key, value) =>
      wrap('SET', async () => {
        await c.set(key, value);
      }),
    get: (key) => wrap('GET', async () => ((await c.get(key)) ?? null)?.toString() ?? null),
    claim: (key, value, pxMs) =>
      wrap('SET NX', async () => {
        const res = await c.set(key, value, {
          conditionalSet: 'onlyIfDoesNotExist',
          expiry: { type: TimeUnit.Milliseconds, count: pxMs },
        });
        return res !== null;
      }),
    del: (key) =>
      wrap('DEL', async () => {
        await c.del([key]);
      }),
    // Glide takes the message first.
    publish: (channel, message) => wrap('PUBLISH', () => c.publish(message, channel)),
  };
}

/** The private parts of RateLimiterValkeyGlide that the reload needs. */
interface GlideLimiterInternals {
  _upsert(...args: unknown[]): Promise<unknown>;
  _get(...args: unknown[]): Promise<unknown>;
  _scriptLoaded: boolean;
  _getScriptLoaded: boolean;
}

/**
 * The glide limiter remembers "functions loaded" forever. After FUNCTION FLUSH, a restart of
 * a node without persistence, or a failover to a fresh primary, every FCALL then fails with
 * "Function not found". Forget the flag and retry once, which loads the library again.
 */
function reloadFunctionsWhenMissing(limiter: RateLimiterValkeyGlide): RateLimiterValkeyGlide {
  const internals = limiter as unknown as GlideLimiterInternals;
  for (const method of ['_upsert', '_get'] as const) {
    const original = internals[method].bind(limiter);
    internals[method] = async (...args: unknown[]) => {
      try {
        return await original(...args);
      } catch (err) {
        if (!/function not found/i.test(describeError(err))) throw err;
        internals._scriptLoaded = false;
        internals._getScriptLoaded = false;
        return original(...args);
      }
    };
  }
  return limiter;
}
