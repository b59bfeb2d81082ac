/**
 * What a Valkey client library gives the store: a connection that builds rate-limiter-flexible's
 * limiter for that library, runs plain commands and scripts, pings and closes. One
 * driver per library (this folder); the table in registry.ts names them.
 */
import type { RateLimiterAbstract, RateLimiterStoreAbstract } from 'rate-limiter-flexible';
import { StoreConnectError, describeError } from '../errors.js';
import type { KeyValue } from '../kv.js';
import type { StoreOptions } from '../options.js';
import { withinDeadline } from '../../util/deadline.js';

/**
 * The settings in force, as passed to the client library (recorded by benchmarks): `client`
 * and `mode`, the timeouts as commandTimeoutMs / connectTimeoutMs (glide: requestTimeoutMs /
 * connectionTimeoutMs) and inflightRequestsLimit, the names the report compares across clients.
 */
export type EffectiveSettings = Record<string, string | number | boolean | null>;

/** A channel to listen on from the moment the client connects. */
export interface ChannelListener {
  channel: string;
  onMessage(message: string): void;
}

/** rate-limiter-flexible's options for a store limiter, less the client the driver supplies. */
export interface StoreLimiterOptions {
  keyPrefix: string;
  points: number;
  duration: number;
  insuranceLimiter?: RateLimiterAbstract;
}

/** Runs one of the scripts it was made with: (name, keys, args) -> the reply. */
export type ScriptRunner<N extends string> = (
  name: N,
  keys: readonly string[],
  args: readonly string[],
) => Promise<unknown>;

/** One connected client. */
export interface ClientConnection {
  readonly settings: EffectiveSettings;
  /** rate-limiter-flexible's limiter class for this library, on this connection. */
  limiter(opts: StoreLimiterOptions): RateLimiterStoreAbstract;
  /** Plain SET with a lease, GET, SET NX, DEL and PUBLISH. */
  readonly kv: KeyValue;
  /**
   * Register Lua scripts by name (loaded again when the server lost them); each call names
   * its keys, which in cluster must share a slot.
   */
  scripts<N extends string>(lua: Record<N, string>): ScriptRunner<N>;
  ping(): Promise<unknown>;
  /** Close the connection. Never deletes server-side function libraries. */
  close(): Promise<void>;
}

export interface ClientDriver {
  /**
   * Create and connect a client; fails with StoreConnectError within timeouts.connectMs.
   * With a listener the client is a subscriber and serves no other command.
   */
  connect(opts: StoreOptions, listener?: ChannelListener): Promise<ClientConnection>;
}

/** "ioredis (cluster) to host:port,...": what a connect error names. */
export function target(opts: StoreOptions): string {
  const nodes = opts.nodes.map((n) => `${n.host}:${n.port}`).join(',');
  return `${opts.client} (${opts.mode}) to ${nodes}`;
}

/**
 * Race a connection attempt against a deadline. A client that connects after the deadline
 * is handed to `lateCleanup` so it does not keep the process alive.
 */
export async function withDeadline<T>(
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
