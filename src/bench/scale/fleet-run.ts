/**
 * `sluice bench scale-fleet`: the scaled-down real run of issue 33. Gateway processes, each
 * on a loopback address of its own, on a 6-node Valkey Cluster of the run's own (3 primaries,
 * 3 replicas), a reference relay behind them, open-loop writes from a million-identity Zipf
 * population and a hot key through every gateway; the hot key's primary is killed (SIGKILL,
 * a replica takes over) and later its slot is moved to another primary under load. Then,
 * apart: pressure reports published to every gateway and to further subscribed connections,
 * each timed from publication to being applied.
 *
 * Judged against the accuracy contract (bound.ts, GATEWAY.md): no client over its limit by
 * more than the bound; no answer but 2xx and 429; the gateways back on Valkey (no insured
 * decision) soon after the replica took over.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { runDir } from '../../harness/paths.js';
import { startGateway, startRelay } from '../../harness/processes.js';
import type { RunningGateway, SluiceProcess } from '../../harness/processes.js';
import { parsePrometheusValue } from '../../pressure/feed/samplers.js';
import { PRESSURE_CHANNEL, encodeReport, pressureKey } from '../../pressure/report.js';
import { createStore } from '../../store/index.js';
import { DEFAULT_CLIENT } from '../../store/options.js';
import type { NodeAddress, Store } from '../../store/index.js';
import { openNodeConnection } from '../../store/node.js';
import type { NodeConnection } from '../../store/node.js';
import { startInstance, stopInstance } from '../../valkey/embedded.js';
import type { ClusterNodeView } from '../../valkey/cluster.js';
import { eventPool, preload } from '../run/event-pool.js';
import { configOverBound } from './bound.js';
import {
  ADMIN_TIMEOUT_MS,
  awaitTakeover,
  clusterViews,
  migrateSlot,
  ownerOf,
  servesSlot,
} from './cluster-faults.js';
import {
  FLEET_ADMIN_TOKEN,
  FLEET_NODE,
  HOT_ADDRESS,
  fleetGatewayConfig,
  slotOfAddress,
} from './fleet-config.js';
import type { FleetRunConfig } from './fleet-config.js';
import { startFleetLoad } from './fleet-load.js';
import type { FleetLoadTally } from './fleet-load.js';
import { startSubscribers } from './fleet-subscribers.js';

const HOST = '127.0.0.1';
const SCRAPE_MS = 250;
const KEEPALIVE_REPORT_MS = 250;
/** More events than the busiest address sends in a default run (the hot key: 1,800). */
const POOL_SIZE = 2000;
/** Gateways started at once (each costs about a second of CPU to start). */
const START_PARALLEL = 3;
/** The bound assumes a failover loses at most this stretch of writes (as the simulation). */
const LOST_MS = 100;

export interface FleetRunResult {
  config: FleetRunConfig;
  valkeyVersion: string;
  load: Omit<FleetLoadTally, 'admittedBy' | 'hotAdmittedAtMs'> & { wallSec: number };
  accuracy: {
    limit: number;
    /** Over-admission allowed per key by the contract, from the settings. */
    bound: number;
    keysOverLimit: number;
    maxOverPoints: number;
    keysOverBound: number;
    hot: { admitted: number; beforeKill: number; outage: number; afterTakeover: number };
  };
  failover: {
    killedPort: number;
    /** ms from the kill until the cluster had another primary for the slot. */
    takeoverMs: number;
    /** Per gateway: ms after the takeover of its last insured decision (<= 0: none after). */
    lastInsuredAfterTakeoverMs: number[];
  };
  migration: { keys: number; durationMs: number };
  /**
   * Insured decisions (Valkey failed, the share decided) over every gateway, by phase: before
   * the kill, the primary down, after the takeover, the migration (and 1 s after), the rest.
   */
  insured: {
    beforeKill: number;
    down: number;
    afterTakeover: number;
    migration: number;
    after: number;
  };
  multiplier: {
    subscribers: number;
    reports: number;
    /** Reports applied / expected, over every subscriber. */
    reached: number;
    expected: number;
    connections: { p50: number; p99: number; max: number };
    /** Each gateway process's own p99 (its propagation summary). */
    gatewayP99Ms: number[];
  };
}

interface Scrape {
  at: number;
  insured: number[];
}

/** Sum of a counter's samples whose labels contain `labelPart`. */
export function metricSum(text: string, name: string, labelPart: string): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) || !line.includes(labelPart)) continue;
    sum += Number(line.slice(line.lastIndexOf(' ') + 1)) || 0;
  }
  return sum;
}

async function metricsOf(gw: RunningGateway): Promise<string> {
  const res = await fetch(`${gw.adminUrl}/metrics`, {
    headers: { authorization: `Bearer ${FLEET_ADMIN_TOKEN}` },
    signal: AbortSignal.timeout(2000),
  });
  return res.text();
}

function quantile(sorted: Float64Array, q: number): number {
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]! : 0;
}

/** Publishes pressure reports as a feed would: the leased key, then the channel. */
class ReportPublisher {
  private seq = 0;
  constructor(
    private readonly store: Store,
    private readonly channel: NodeConnection,
  ) {}

  async publish(m: number): Promise<void> {
    const text = encodeReport({
      node: FLEET_NODE,
      m,
      u: 0.5,
      uhat: 0.5,
      mode: 'normal',
      seq: this.seq++,
      ts: Date.now(),
      law: 'bench',
    });
    await this.store.kv.setWithLease(pressureKey(FLEET_NODE), text, 10_000).catch(() => undefined);
    await this.channel.call('PUBLISH', PRESSURE_CHANNEL, text);
  }
}

export async function runFleet(
  cfg: FleetRunConfig,
  log: (line: string) => void,
): Promise<FleetRunResult> {
  if (cfg.migrateAtSec <= cfg.killAtSec || cfg.migrateAtSec >= cfg.durationSec) {
    throw new RangeError('the migration comes after the kill, within the run');
  }
  const env = { ...process.env, SLUICE_RUN_DIR: path.join(runDir(), 'scale-fleet') };
  const quiet = { info: () => undefined, warn: log };
  const cluster = { topology: 'cluster' as const, port: cfg.clusterBasePort };
  const work = mkdtempSync(path.join(os.tmpdir(), 'sluice-scale-fleet-'));
  const gateways: RunningGateway[] = [];
  let relay: SluiceProcess | undefined;
  let store: Store | undefined;
  let channel: NodeConnection | undefined;
  try {
    const record = await startInstance(cluster, quiet, env);
    const nodes: NodeAddress[] = record.ports.map((port) => ({ host: HOST, port }));
    await Promise.all(nodes.map((n) => setNodeTimeout(n, cfg.nodeTimeoutMs)));
    log(`cluster on ${nodes[0]!.port}-${nodes[5]!.port} (${record.version})`);

    const hotSlot = slotOfAddress(HOT_ADDRESS);
    const views = await clusterViews(nodes[0]!);
    const hotOwner = views.find((v) => v.role === 'primary' && servesSlot(v, hotSlot))!;
    // Pub/sub goes through a node that is neither killed nor moved to: a replica elsewhere.
    const stable = views.find((v) => v.role === 'replica' && v.primaryId !== hotOwner.id)!;
    channel = await openNodeConnection({ host: HOST, port: stable.port }, ADMIN_TIMEOUT_MS);
    store = await createStore({ client: DEFAULT_CLIENT, mode: 'cluster', nodes: [nodes[0]!] });
    const publisher = new ReportPublisher(store, channel);

    relay = await startRelay({ nodeId: FLEET_NODE, env });
    const pool = eventPool(POOL_SIZE, cfg.seed);
    await preload(relay.url, pool);
    const keyPrefix = `sluice-fleet-${Date.now().toString(36)}`;
    for (let g = 0; g < cfg.gateways; g += START_PARALLEL) {
      const batch = Array.from({ length: Math.min(START_PARALLEL, cfg.gateways - g) }, (_, i) =>
        startGateway(
          fleetGatewayConfig(cfg, g + i, nodes[0]!, relay!.url, keyPrefix),
          path.join(work, `gateway-${g + i}.json`),
          { env },
        ),
      );
      gateways.push(...(await Promise.all(batch)));
    }
    log(`${cfg.gateways} gateways up (${gateways[0]!.url} ... ${gateways.at(-1)!.url})`);

    const multiplier = await measureMultiplier(cfg, gateways, nodes[0]!, publisher, log);

    // The load phase: the multiplier kept at 1 by fresh reports, as a feed would.
    const keepalive = setInterval(
      () => void publisher.publish(1).catch(() => undefined),
      KEEPALIVE_REPORT_MS,
    );
    const scrapes: Scrape[] = [];
    const scraper = setInterval(() => {
      const at = performance.now();
      void Promise.all(gateways.map((gw) => metricsOf(gw).catch(() => ''))).then((texts) =>
        scrapes.push({
          at,
          insured: texts.map((t) => metricSum(t, 'sluice_decisions_total', 'outcome="insured"')),
        }),
      );
    }, SCRAPE_MS);
    const load = startFleetLoad(
      cfg,
      gateways.map((gw) => gw.url),
      pool,
    );
    const t0 = performance.now() - load.elapsedMs();
    try {
      await sleep(cfg.killAtSec * 1000 - load.elapsedMs());
      const killedAt = performance.now();
      const killed = killPrimary(hotOwner, record);
      log(
        `killed the hot key's primary (port ${killed.port}) at ${((killedAt - t0) / 1000).toFixed(1)} s`,
      );
      const survivor = nodes.find((n) => n.port !== hotOwner.port && n.port !== stable.port)!;
      const takeover = await awaitTakeover(survivor, hotSlot, hotOwner.id, 30_000);
      log(
        `port ${takeover.owner.port} took the slot over after ${(takeover.at - killedAt).toFixed(0)} ms`,
      );

      await sleep(Math.max(0, cfg.migrateAtSec * 1000 - load.elapsedMs()));
      const source = await ownerOf(survivor, hotSlot);
      const primaries = (await clusterViews(survivor)).filter(
        (v) => v.role === 'primary' && !v.failed && v.slots.length > 0,
      );
      const target = primaries.find((v) => v.id !== source.id)!;
      const move = await migrateSlot(
        hotSlot,
        { ...source, address: { host: HOST, port: source.port } },
        { ...target, address: { host: HOST, port: target.port } },
        primaries.map((p) => ({ host: HOST, port: p.port })),
        cfg.migrateKeyPauseMs,
      );
      log(
        `slot ${hotSlot} moved ${source.port} -> ${target.port}: ${move.keys} keys in ${(move.endedAt - move.startedAt).toFixed(0)} ms`,
      );

      const tally = await load.done;
      clearInterval(scraper);
      clearInterval(keepalive);
      await sleep(SCRAPE_MS * 2);
      const wallSec = (performance.now() - t0) / 1000;
      return {
        config: cfg,
        valkeyVersion: record.version,
        load: loadFigures(tally, wallSec),
        accuracy: accuracyOf(cfg, tally, killedAt - t0, takeover.at - t0),
        failover: {
          killedPort: killed.port,
          takeoverMs: takeover.at - killedAt,
          lastInsuredAfterTakeoverMs: lastInsured(scrapes, killedAt, move.startedAt).map((at) =>
            at === undefined ? -Infinity : at - takeover.at,
          ),
        },
        migration: { keys: move.keys, durationMs: move.endedAt - move.startedAt },
        insured: {
          beforeKill: insuredBetween(scrapes, -Infinity, killedAt),
          down: insuredBetween(scrapes, killedAt, takeover.at),
          afterTakeover: insuredBetween(scrapes, takeover.at, move.startedAt),
          migration: insuredBetween(scrapes, move.startedAt, move.endedAt + 1000),
          after: insuredBetween(scrapes, move.endedAt + 1000, Infinity),
        },
        multiplier,
      };
    } finally {
      clearInterval(scraper);
      clearInterval(keepalive);
    }
  } finally {
    await Promise.allSettled(gateways.map((gw) => gw.proc.stop()));
    await relay?.stop();
    await store?.close().catch(() => undefined);
    channel?.close();
    await stopInstance(cluster, quiet, env).catch((err: Error) =>
      log(`stopping the cluster: ${err.message}`),
    );
    rmSync(work, { recursive: true, force: true });
  }
}

async function setNodeTimeout(node: NodeAddress, ms: number): Promise<void> {
  const conn = await openNodeConnection(node, ADMIN_TIMEOUT_MS);
  try {
    await conn.call('CONFIG', 'SET', 'cluster-node-timeout', ms);
  } finally {
    conn.close();
  }
}

function killPrimary(
  owner: ClusterNodeView,
  record: { ports: number[]; pids: number[] },
): { port: number } {
  const i = record.ports.indexOf(owner.port);
  const pid = record.pids[i];
  if (pid === undefined) throw new Error(`no recorded process serves port ${owner.port}`);
  process.kill(pid, 'SIGKILL');
  return { port: owner.port };
}

/**
 * Publish cfg.reports reports (m alternating 0.9 and 1, ending at 1) to the gateways and
 * cfg.subscribers - gateways further subscribed connections; each measures publication to
 * applied (its follower's propagation).
 */
async function measureMultiplier(
  cfg: FleetRunConfig,
  gateways: RunningGateway[],
  seed: NodeAddress,
  publisher: ReportPublisher,
  log: (line: string) => void,
): Promise<FleetRunResult['multiplier']> {
  const extra = Math.max(0, cfg.subscribers - gateways.length);
  const subs = extra > 0 ? await startSubscribers(extra, seed) : undefined;
  try {
    const before = await Promise.all(gateways.map((gw) => metricsOf(gw)));
    const counted = (t: string) =>
      parsePrometheusValue(t, 'sluice_pressure_propagation_seconds_count') ?? 0;
    const intervalMs = 1000 / cfg.reportsPerSec;
    const started = performance.now();
    for (let i = 0; i < cfg.reports; i++) {
      await sleep(Math.max(0, started + i * intervalMs - performance.now()));
      await publisher.publish(i % 2 === 0 && i !== cfg.reports - 1 ? 0.9 : 1);
    }
    await sleep(500);
    const after = await Promise.all(gateways.map((gw) => metricsOf(gw)));
    const connections = subs ? await subs.collect() : [];
    const sorted = Float64Array.from(connections).sort();
    const gatewayApplied = after.reduce((s, t, g) => s + counted(t) - counted(before[g]!), 0);
    const gatewayP99Ms = after.map(
      (t) =>
        1000 *
        (parsePrometheusValue(t, 'sluice_pressure_propagation_seconds', '{quantile="0.99"}') ??
          NaN),
    );
    log(`multiplier: ${cfg.reports} reports to ${gateways.length + extra} subscribers`);
    return {
      subscribers: gateways.length + extra,
      reports: cfg.reports,
      reached: connections.length + gatewayApplied,
      expected: cfg.reports * (gateways.length + extra),
      connections: {
        p50: quantile(sorted, 0.5),
        p99: quantile(sorted, 0.99),
        max: quantile(sorted, 1),
      },
      gatewayP99Ms,
    };
  } finally {
    subs?.stop();
  }
}

function loadFigures(t: FleetLoadTally, wallSec: number): FleetRunResult['load'] {
  const rest: Partial<FleetLoadTally> = { ...t };
  delete rest.admittedBy;
  delete rest.hotAdmittedAtMs;
  return { ...(rest as FleetRunResult['load']), wallSec };
}

function accuracyOf(
  cfg: FleetRunConfig,
  t: FleetLoadTally,
  killMs: number,
  takeoverMs: number,
): FleetRunResult['accuracy'] {
  const terms = { limit: cfg.limit, gateways: cfg.gateways, workers: 1, leases: true };
  const hotRate = cfg.writesPerSec * cfg.hotShare;
  const bound = configOverBound(terms, { lostMs: LOST_MS, ratePerSec: hotRate }, true);
  let keysOverLimit = 0;
  let maxOverPoints = 0;
  let keysOverBound = 0;
  for (const admitted of t.admittedBy.values()) {
    const over = admitted - cfg.limit;
    if (over <= 0) continue;
    keysOverLimit++;
    maxOverPoints = Math.max(maxOverPoints, over);
    if (over > bound) keysOverBound++;
  }
  const hotAt = t.hotAdmittedAtMs;
  return {
    limit: cfg.limit,
    bound,
    keysOverLimit,
    maxOverPoints,
    keysOverBound,
    hot: {
      admitted: hotAt.length,
      beforeKill: hotAt.filter((ms) => ms < killMs).length,
      outage: hotAt.filter((ms) => ms >= killMs && ms < takeoverMs).length,
      afterTakeover: hotAt.filter((ms) => ms >= takeoverMs).length,
    },
  };
}

/** Per gateway, when (the scrape that saw it) its last insured decision in [from, to) was. */
function lastInsured(scrapes: Scrape[], from: number, to: number): (number | undefined)[] {
  const n = scrapes[0]?.insured.length ?? 0;
  const last = new Array<number | undefined>(n).fill(undefined);
  for (let i = 1; i < scrapes.length; i++) {
    const s = scrapes[i]!;
    if (s.at < from || s.at >= to + SCRAPE_MS) continue;
    for (let g = 0; g < n; g++) {
      if (s.insured[g]! > scrapes[i - 1]!.insured[g]!) last[g] = s.at;
    }
  }
  return last;
}

/** Insured decisions of every gateway between the scrapes that bracket [from, to). */
function insuredBetween(scrapes: Scrape[], from: number, to: number): number {
  const total = (s: Scrape | undefined) => s?.insured.reduce((a, b) => a + b, 0) ?? 0;
  const start = scrapes.filter((s) => s.at < from).at(-1);
  const end = scrapes.filter((s) => s.at < to).at(-1);
  return Math.max(0, total(end) - total(start));
}
