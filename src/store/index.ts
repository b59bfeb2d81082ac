import { closeClient, connectClient, pingClient } from './connect.js';
import { keyValue } from './kv.js';
import type { KeyValue } from './kv.js';
import type { EffectiveSettings, RawClient } from './connect.js';
import { StoreError, describeError } from './errors.js';
import { buildLimiter } from './limiter.js';
import type { LimiterOptions, QuotaLimiter } from './limiter.js';
import { parseStoreOptions } from './options.js';
import type { ClientKind, StoreOptionsInput, Topology } from './options.js';

export { clientKey, DEFAULT_KEY_SALT } from './keys.js';
export type { ClientKey } from './keys.js';
export { StoreConfigError, StoreConnectError, StoreError } from './errors.js';
export type { Decision, LimiterOptions, QuotaLimiter } from './limiter.js';
export { CLIENT_KINDS, TOPOLOGIES, parseNodeAddress, parseStoreOptions } from './options.js';
export type { ClientKind, NodeAddress, StoreOptionsInput, Topology } from './options.js';
export type { EffectiveSettings, RawClient } from './connect.js';
export type { KeyValue } from './kv.js';

/** A connected Valkey client of the configured kind and the limiters that match it. */
export interface Store {
  readonly client: ClientKind;
  readonly mode: Topology;
  /** The client settings in force, as passed to the library. */
  readonly settings: Readonly<EffectiveSettings>;
  /** The underlying client, for the few callers (pub/sub, benchmarks) that need it. */
  readonly raw: RawClient;
  /** A limiter backed by this store: RateLimiterValkeyGlide, RateLimiterValkey or RateLimiterRedis. */
  limiter(opts: LimiterOptions): QuotaLimiter;
  /** Plain SET with a lease, GET and PUBLISH. */
  readonly kv: KeyValue;
  ping(): Promise<void>;
  /** Close the connection. Never deletes server-side function libraries. */
  close(): Promise<void>;
}

/**
 * The only place that creates Valkey clients. Validates the options (errors name the key),
 * connects within timeouts.connectMs, and fails with StoreConnectError if it cannot.
 */
export async function createStore(input: StoreOptionsInput): Promise<Store> {
  const opts = parseStoreOptions(input);
  const { raw, settings } = await connectClient(opts);
  let closed = false;
  return {
    client: opts.client,
    mode: opts.mode,
    settings: Object.freeze({ ...settings }),
    raw,
    limiter: (limiterOpts) => buildLimiter(raw, limiterOpts),
    kv: keyValue(raw),
    async ping() {
      try {
        await pingClient(raw);
      } catch (err) {
        throw new StoreError(`ping failed: ${describeError(err)}`, { cause: err });
      }
    },
    async close() {
      if (closed) return;
      closed = true;
      await closeClient(raw);
    },
  };
}

/** A dedicated connection that listens on one channel. */
export interface Subscription {
  close(): Promise<void>;
}

/**
 * Listen on a channel through the configured client, on a connection of its own (a
 * subscribed connection cannot serve other commands). The clients resubscribe by themselves
 * after a reconnect; callers should still re-read state, since messages sent meanwhile are lost.
 */
export async function subscribe(
  input: StoreOptionsInput,
  channel: string,
  onMessage: (message: string) => void,
): Promise<Subscription> {
  const opts = parseStoreOptions(input);
  const { raw } = await connectClient(opts, { channel, onMessage });
  return { close: () => closeClient(raw) };
}
