/** One benchmark run's configuration, and the name of the file its result goes to. */
import type { ClientKind, Topology } from '../../store/options.js';
import type { KeyDistribution } from './keys.js';

export const IMPLEMENTATIONS = [
  'valkey-glide',
  'iovalkey',
  'ioredis',
  'quotas-off',
  'fastify-rate-limit',
] as const;
export type Implementation = (typeof IMPLEMENTATIONS)[number];

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
}

/** `{implementation}_{mode}_{workload}_{connections}c_{duration}s_run{N}.json` (no ':'). */
export function runFileName(c: RunConfig): string {
  const name = `${c.implementation}_${c.mode}_${c.workload}_${c.connections}c_${c.durationSec}s_run${c.run}.json`;
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
  if (mode !== 'standalone' && mode !== 'cluster') {
    throw new Error(`unknown topology "${mode}" in "${text}": expected standalone or cluster`);
  }
  return { implementation: impl as Implementation, mode };
}

/** The Valkey client each implementation uses. */
export function clientOf(impl: Implementation): ClientKind | null {
  if (impl === 'quotas-off') return null;
  if (impl === 'fastify-rate-limit') return 'ioredis';
  return impl;
}
