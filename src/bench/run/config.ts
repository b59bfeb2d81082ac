/** One benchmark run's configuration, and the name of the file its result goes to. */
import type { ClientKind, Topology } from '../../store/options.js';
import type { KeyDistribution } from './keys.js';

export const IMPLEMENTATIONS = [
  'valkey-glide',
  'iovalkey',
  'ioredis',
  // The same clients with quota leases (quotas.lease): points spent locally, taken in leases.
  'valkey-glide+lease',
  'iovalkey+lease',
  'ioredis+lease',
  'quotas-off',
  'fastify-rate-limit',
  // The load straight to the relay: no front end, no Valkey client (the Nostr baseline).
  'relay-alone',
] as const;
export type Implementation = (typeof IMPLEMENTATIONS)[number];

/** The relay behind the front end: ours, or one that users run (built from crates.io). */
export const RELAY_IMPLS = ['reference', 'nostr-rs-relay'] as const;
export type RelayImpl = (typeof RELAY_IMPLS)[number];

export const WORKLOADS = [
  'light',
  'heavy',
  'flood',
  'nostr',
  'adaptive-none',
  'adaptive-pid',
  'adaptive-lead',
] as const;
export type Workload = (typeof WORKLOADS)[number];

export interface RunConfig {
  implementation: Implementation;
  /** The Valkey client: the implementation's, ioredis for the peer, null with quotas off. */
  client: ClientKind | null;
  mode: Topology;
  workload: Workload;
  transport: 'http' | 'websocket';
  connections: number;
  durationSec: number;
  warmupSec: number;
  run: number;
  runs: number;
  keys: number;
  distribution: KeyDistribution;
  zipfExponent: number | null;
  floodShare: number | null;
  quota: { points: number; windowSec: number };
  inMemoryBlock: boolean;
  relayWorkIterations: number;
  law: 'none' | 'pid' | 'lead' | null;
  seed: number;
  /** Which relay the run measures; absent in files from before it could be chosen. */
  relayImpl?: RelayImpl;
  /**
   * Nostr: every EVENT is new to the relay and the gateway, pre-signed before the warm-up for
   * up to `maxPerSec` over warm-up + window, by `authors` distinct keys. null: the 500-event
   * pool, re-sent (HTTP workloads).
   */
  freshEvents?: { maxPerSec: number; authors: number } | null;
  /**
   * Nostr: who the gateway charges besides the sender. `pubkey` (the default configuration's
   * order): every EVENT's signature verified, the author charged, replays answered as
   * duplicates. `relay-verified`: the author charged when the relay accepts the event
   * (nostr.verify relay), no verification at the gateway. `ip`: the sender only, no
   * verification (nostr.verify auto). Absent: pubkey.
   */
  nostrIdentity?: 'pubkey' | 'relay-verified' | 'ip';
  /** Gateway processes (node:cluster workers); absent: 1. */
  workers?: number;
  /** HTTP: a fixed offered rate (open loop, latency from intended send times); absent: closed. */
  rate?: number | null;
}

/**
 * `{implementation}_{mode}_{workload}_{connections}c_{duration}s_run{N}.json` (no ':'), with
 * `_{relayImpl}` after the workload when the relay is not the reference one; Nostr runs that
 * charge the sender only are named `nostr-sender-only`, those charging authors on the
 * relay's OK `nostr-relay-verified`.
 */
export function runFileName(c: RunConfig): string {
  const relay = c.relayImpl && c.relayImpl !== 'reference' ? `_${c.relayImpl}` : '';
  const workload =
    c.nostrIdentity === 'ip'
      ? `${c.workload}-sender-only`
      : c.nostrIdentity === 'relay-verified'
        ? `${c.workload}-relay-verified`
        : c.rate
          ? `${c.workload}-rate${c.rate}`
          : c.workload;
  const workers = c.workers && c.workers > 1 ? `-${c.workers}w` : '';
  const name = `${c.implementation}${workers}_${c.mode}_${workload}${relay}_${c.connections}c_${c.durationSec}s_run${c.run}.json`;
  if (/[:/\\]/.test(name)) throw new Error(`unsafe result file name: ${name}`);
  return name;
}

/** "valkey-glide:cluster" → implementation and topology; a bare name means standalone. */
export function parseTarget(text: string): { implementation: Implementation; mode: Topology } {
  const [impl, mode = 'standalone', extra] = text.trim().split(':');
  if (extra !== undefined || !(IMPLEMENTATIONS as readonly string[]).includes(impl!)) {
    throw new Error(
      `unknown implementation "${text}": expected one of ${IMPLEMENTATIONS.join(', ')}, optionally with :cluster`,
    );
  }
  if (impl === 'relay-alone' && text.includes(':')) {
    throw new Error('relay-alone has no Valkey topology: give it without :standalone or :cluster');
  }
  if (mode !== 'standalone' && mode !== 'cluster') {
    throw new Error(`unknown topology "${mode}" in "${text}": expected standalone or cluster`);
  }
  return { implementation: impl as Implementation, mode };
}

/** The Valkey client each implementation uses. */
export function clientOf(impl: Implementation): ClientKind | null {
  if (impl === 'quotas-off' || impl === 'relay-alone') return null;
  if (impl === 'fastify-rate-limit') return 'ioredis';
  return impl.replace(/\+lease$/, '') as ClientKind;
}

/** Whether the implementation is a sluice client with quota leases on. */
export function leases(impl: Implementation): boolean {
  return impl.endsWith('+lease');
}
