/**
 * The gateways, multiplier readings and feed figures of a closed-loop run (the adaptive and
 * OOM benchmarks): gateways with pressure on or off per arm, what they apply to a node now,
 * and what the feed and gateways counted by the end.
 */
import path from 'node:path';
import { parsePrometheusValue } from '../../pressure/feed/samplers.js';
import { startGateway } from '../../harness/processes.js';
import type { SluiceProcess } from '../../harness/processes.js';
import type { ClientKind, Topology } from '../../store/options.js';
import { median } from '../stats.js';
import { BENCH_ADMIN_TOKEN } from './gateway-config.js';
import { ARMS } from './config.js';
import type { Law } from './config.js';
import { DEFAULT_LAW } from '../../pressure/laws/registry.js';
import type { LawName } from '../../pressure/laws/registry.js';

/** The arms: no adaptation, then each control law (config.ts's ARMS). */
export type Variant = Law;
export const VARIANTS: readonly Variant[] = ARMS;

/** The law an arm's feed runs: its own; without adaptation the default (gateways ignore it). */
export function feedLawOf(variant: Variant): LawName {
  return variant === 'none' ? DEFAULT_LAW : variant;
}

/** The Valkey a variant's feed and gateways use. */
export interface AdaptiveValkey {
  client: ClientKind;
  mode: Topology;
  nodes: string[];
}

export interface BenchGateway {
  proc: SluiceProcess;
  url: string;
  admin: string;
}

export interface PressureGatewayOptions {
  variant: Variant;
  count: number;
  nodeId: string;
  relayUrl: string;
  valkey: AdaptiveValkey;
  /** Writes per second per client identity (the default tier), window 1 s. */
  quotaPerSec: number;
  maxBodyBytes: number;
  /** The feed's tick: a feed is stale after three. */
  tickMs: number;
  /** The node's write budget at m = 1 (all gateways together), when the gateway has one. */
  writeBudget?: { points: number; windowSec: number };
  /** Further gateway settings (e.g. a health check path for a third-party relay). */
  extra?: Record<string, unknown>;
  configDir: string;
  env: NodeJS.ProcessEnv;
}

/** `count` gateways in front of one node, pressure on unless the variant is `none`. */
export async function startPressureGateways(
  o: PressureGatewayOptions,
  started: { stop(): Promise<unknown> }[],
): Promise<BenchGateway[]> {
  const keyPrefix = `${o.variant}-${Date.now().toString(36)}`;
  const gateways: BenchGateway[] = [];
  for (let g = 0; g < o.count; g++) {
    const gw = await startGateway(
      {
        listen: { port: 0 },
        admin: { port: 0, token: BENCH_ADMIN_TOKEN },
        valkey: { client: o.valkey.client, mode: o.valkey.mode, nodes: o.valkey.nodes },
        upstreams: [
          {
            id: o.nodeId,
            url: o.relayUrl,
            ...(o.writeBudget && o.variant !== 'none' ? { writeBudget: o.writeBudget } : {}),
          },
        ],
        logging: { level: 'warn' },
        workers: 1,
        limits: { maxBodyBytes: o.maxBodyBytes },
        quotas: {
          keyPrefix,
          tiers: { default: { write: { points: o.quotaPerSec, windowSec: 1 } } },
        },
        pressure: {
          enabled: o.variant !== 'none',
          evaluateMs: 100,
          staleAfterMs: 3 * o.tickMs,
          holdMs: 2000,
        },
        ...o.extra,
      },
      path.join(o.configDir, `gw${g}.json`),
      { env: o.env },
    );
    started.push(gw.proc);
    gateways.push({ proc: gw.proc, url: gw.url, admin: gw.adminUrl });
  }
  return gateways;
}

export interface NodeFlow {
  multiplier: number;
  emergency: boolean;
}

/** What a gateway applies to `nodeId` now (its /admin/flow-control). */
export async function readFlow(gateway: BenchGateway, nodeId: string): Promise<NodeFlow> {
  const res = await fetch(`${gateway.admin}/admin/flow-control`, {
    headers: { authorization: `Bearer ${BENCH_ADMIN_TOKEN}` },
    signal: AbortSignal.timeout(2000),
  });
  const flow = (await res.json()) as { nodes: Record<string, NodeFlow> };
  const node = flow.nodes[nodeId];
  if (!node) throw new Error(`gateway ${gateway.admin} knows no node ${nodeId}`);
  return node;
}

async function metricValue(url: string, name: string, labels?: string): Promise<number> {
  // A labelled counter that never moved is not exported at all: that reads as 0.
  return parsePrometheusValue(await (await fetch(url)).text(), name, labels) ?? 0;
}

/** The feed's /metrics, from its ready line. */
export function feedMetricsUrl(feed: SluiceProcess): string {
  return `${feed.url}/metrics`;
}

/** Entries into and exits from emergency, as the feed counted them. */
export async function emergencyTransitions(
  feed: SluiceProcess,
): Promise<{ entries: number; exits: number }> {
  const url = feedMetricsUrl(feed);
  const name = 'sluice_feed_emergency_transitions_total';
  return {
    entries: await metricValue(url, name, '{to="emergency"}'),
    exits: await metricValue(url, name, '{to="normal"}'),
  };
}

/** Feed report -> gateway board, in ms: the median of the gateways' p50s, the worst p99. */
export async function propagationMs(
  gateways: BenchGateway[],
): Promise<{ p50: number; p99: number }> {
  const name = 'sluice_pressure_propagation_seconds';
  const prop = await Promise.all(
    gateways.map(async (g) => ({
      p50: await metricValue(`${g.admin}/metrics`, name, '{quantile="0.5"}'),
      p99: await metricValue(`${g.admin}/metrics`, name, '{quantile="0.99"}'),
    })),
  );
  return {
    p50: 1000 * median(prop.map((p) => p.p50)),
    p99: 1000 * Math.max(...prop.map((p) => p.p99)),
  };
}
