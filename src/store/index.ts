import { CLIENTS } from './clients/registry.js';
import type { KeyValue } from './kv.js';
import type { EffectiveSettings } from './clients/driver.js';
import { StoreError, describeError } from './errors.js';
import { buildLimiter } from './limiter.js';
import { leaseStore } from './lease.js';
import { presenceStore } from './presence.js';
import type { PresenceStore } from './presence.js';
import { admittedCounts } from './admitted.js';
import type { AdmittedCounts } from './admitted.js';
import type { LeaseStore } from './lease.js';
import type { LimiterOptions, QuotaLimiter } from './limiter.js';
import { parseStoreOptions } from './options.js';
import type { ClientKind, StoreOptionsInput, Topology } from './options.js';

export { clientKey, DEFAULT_KEY_SALT } from './keys.js';
export type { ClientKey } from './keys.js';
export { StoreConfigError, StoreConnectError, StoreError } from './errors.js';
export type { Decision, LimiterOptions, QuotaLimiter } from './limiter.js';
export { CLIENT_KINDS, TOPOLOGIES, parseNodeAddress, parseStoreOptions } from './options.js';
export type { ClientKind, NodeAddress, StoreOptionsInput, Topology } from './options.js';
export type { EffectiveSettings } from './clients/driver.js';
export type { KeyValue } from './kv.js';
export type { Lease, LeaseStore } from './lease.js';
export type { PresenceStore } from './presence.js';
export type { AdmittedCounts } from './admitted.js';
export { admittedKey } from './admitted.js';

/** A connected Valkey client of the configured kind and the limiters that match it. */
export interface Store {
  readonly client: ClientKind;
  readonly mode: Topology;
  /** The client settings in force, as passed to the library. */
  readonly settings: Readonly<EffectiveSettings>;
  /** A limiter backed by this store: RateLimiterValkeyGlide, RateLimiterValkey or RateLimiterRedis. */
  limiter(opts: LimiterOptions): QuotaLimiter;
  /** Plain SET with a lease, GET and PUBLISH. */
  readonly kv: KeyValue;
  /** Quota leases on a limiter's counter key: several points in one atomic step. */
  readonly leases: LeaseStore;
  /** Which gateway processes took for a set of quotas lately (the credit's condition). */
  readonly presence: PresenceStore;
  /** What gateways admitted to each relay node (the learned write budget's input). */
  readonly admitted: AdmittedCounts;
  /**
   * Listen on a channel, on a connection of its own (a subscribed connection serves no other
   * command). The clients resubscribe by themselves after a reconnect; callers should still
   * re-read state, since messages sent meanwhile are lost.
   */
  subscribe(channel: string, onMessage: (message: string) => void): Promise<Subscription>;
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
  const { driver } = await CLIENTS[opts.client].load();
  const conn = await driver.connect(opts);
  let closed = false;
  return {
    client: opts.client,
    mode: opts.mode,
    settings: Object.freeze({ ...conn.settings }),
    limiter: (limiterOpts) => buildLimiter(conn, limiterOpts),
    kv: conn.kv,
    leases: leaseStore(conn, { cluster: opts.mode === 'cluster' }),
    presence: presenceStore(conn),
    admitted: admittedCounts(conn),
    async subscribe(channel, onMessage) {
      const listener = await driver.connect(opts, { channel, onMessage });
      return { close: () => listener.close() };
    },
    async ping() {
      try {
        await conn.ping();
      } catch (err) {
        throw new StoreError(`ping failed: ${describeError(err)}`, { cause: err });
      }
    },
    async close() {
      if (closed) return;
      closed = true;
      await conn.close();
    },
  };
}

/** A dedicated connection that listens on one channel. */
export interface Subscription {
  close(): Promise<void>;
}
