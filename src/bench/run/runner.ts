/**
 * One benchmark run: start what it needs (relay unless given, the gateway or the peer under
 * test), warm up, then measure a closed-loop load while sampling every process under test and
 * counting Valkey's commands; write the result file; stop what it started.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { NodeAddress } from '../../store/options.js';
import { spawnSluice, startGateway, startRelay } from '../../harness/processes.js';
import type { SluiceProcess } from '../../harness/processes.js';
import {
  AT_LIMIT,
  AT_LIMIT_SENDER_KEY,
  floorShape,
  isWsFloor,
  leases,
  runsGateway,
  workloadOf,
  workloadSpec,
  READS,
} from './config.js';
import { admittedPastLimit, pastLimitFailures } from './admitted-past-limit.js';
import type { RunConfig } from './config.js';
import { fetchLeaseAccounting } from './lease-accounting.js';
import { clientBodies } from './client-bodies.js';
import { eventPool, preload, storeOverWebSocket } from './event-pool.js';
import { BENCH_ADMIN_TOKEN, BENCH_VALKEY_TIMEOUTS, benchGatewayConfig } from './gateway-config.js';
import type { ArrivalLoadResult } from './arrival-load.js';
import type { LoadResult } from './http-load.js';
import { apiKeyOf, clientAddress, clientAddressV6, keySampler } from './keys.js';
import { ProcessSampler, withCpuPerRequest } from './proc-sampler.js';
import type { WatchedProcess } from './proc-sampler.js';
import { progressBar } from './progress.js';
import { commandCalls, commandDelta, discoverNodes, watchedValkey } from './valkey-stats.js';
import type { ValkeyNode } from './valkey-stats.js';
import { environment } from './environment.js';
import { RESULT_SCHEMA, ratesOf } from './result-schema.js';
import type { RunFile } from './result-schema.js';
import { FreshBudget } from './fresh-budget.js';
import { loadFor } from './load.js';
import type { Load } from './load.js';
import { thirdPartyRelay } from './third-party-relays.js';
import { allowedCpus, pinForRun, pinPid } from '../../harness/pinning.js';

const POOL_SIZE = 500;

export interface RunTargets {
  /** Any node of the topology the run uses. */
  valkey: NodeAddress;
  /** A relay already running (its /stats must match the workload); otherwise one is started. */
  relayUrl?: string;
}

/** One run's file, as its schema (result-schema.ts) defines it. */
export type RunResult = RunFile;

/** How the load names client i's address: IPv4, or IPv6 under --ipv6-clients. */
function addressOf(cfg: RunConfig): (i: number) => string {
  return cfg.ipv6Clients ? clientAddressV6 : clientAddress;
}

/** One write from each flooder, so all of them start the run over their limit. */
async function exhaustFlooders(
  url: string,
  cfg: RunConfig,
  bodyFor: (client: string) => string,
): Promise<void> {
  const flooders = Math.floor((cfg.floodShare ?? 0) * cfg.keys);
  let next = 0;
  const worker = async () => {
    while (next < flooders) {
      const i = next++;
      const address = addressOf(cfg)(i);
      const res = await fetch(`${url}/events`, {
        method: 'POST',
        body: bodyFor(address),
        headers: {
          'content-type': 'application/json',
          'x-api-key': apiKeyOf(i),
          'x-forwarded-for': address,
        },
      });
      await res.arrayBuffer();
    }
  };
  await Promise.all(Array.from({ length: 64 }, worker));
}

type RunBase = Pick<
  RunResult,
  'schema' | 'config' | 'startedAt' | 'machine' | 'versions' | 'timeseries' | 'adaptive'
>;

/** A run that could not be carried out: its file says why and holds no figures. */
export function failedRun(
  base: RunBase,
  err: unknown,
  clientSettings: Record<string, unknown> | null,
  log: (line: string) => void,
): RunResult {
  const reason = err instanceof Error ? err.message : String(err);
  log(`run failed: ${reason}`);
  return {
    ...base,
    status: 'failed',
    failureReasons: [reason],
    clientSettings,
    finishedAt: new Date().toISOString(),
    wallSeconds: null,
    counts: null,
    rates: null,
    latencyMs: null,
    processes: [],
    valkey: null,
  };
}

/** Why a finished run cannot be used; empty when it can. */
export function failureReasons(cfg: RunConfig, load: LoadResult): string[] {
  const reasons: string[] = [];
  const c = load.counts;
  if (c.requests === 0) reasons.push('no responses');
  if (c.errors > 0) reasons.push(`${c.errors} connection errors or timeouts`);
  for (const [code, count] of Object.entries(c.otherStatuses)) {
    reasons.push(`${count} responses with status ${code}`);
  }
  if (c.otherNon2xx > 0 && Object.keys(c.otherStatuses).length === 0) {
    reasons.push(`${c.otherNon2xx} rejections other than rate-limited`);
  }
  if (cfg.implementation === 'quotas-off' && c.limited429 > 0) {
    reasons.push(`${c.limited429} rate-limited answers with quotas off`);
  }
  if (load.reads) {
    if (load.reads.short > 0) {
      reasons.push(
        `${load.reads.short} pages ended with fewer than the ${READS.limit} events asked`,
      );
    }
    if (c.timeouts * 20 > c.requests) {
      reasons.push(`${c.timeouts} REQs of ${c.requests + c.timeouts} never finished (EOSE)`);
    }
  }
  if (cfg.freshEvents && c.limited429 > 0 && !workloadSpec(workloadOf(cfg)).atLimit) {
    reasons.push(
      `${c.limited429} rate-limited answers: the Nostr throughput workload must not meet a quota ` +
        `(raise --quota-points, now ${cfg.quota.points} per ${cfg.quota.windowSec} s)`,
    );
  }
  return reasons;
}

async function relayStats(url: string) {
  const res = await fetch(`${url}/stats`);
  if (!res.ok) throw new Error(`relay ${url}/stats answered ${res.status}`);
  return (await res.json()) as { pid: number; workIterations: number; nodeId: string };
}

async function adminJson(admin: string, route: string): Promise<Record<string, unknown>> {
  const res = await fetch(`${admin}${route}`, {
    headers: { authorization: `Bearer ${BENCH_ADMIN_TOKEN}` },
  });
  if (!res.ok) throw new Error(`${route} answered ${res.status}`);
  return (await res.json()) as Record<string, unknown>;
}

/** The system under test: the sluice gateway (quotas on or off) or the peer. */
async function startFrontEnd(
  cfg: RunConfig,
  valkey: NodeAddress,
  relayUrl: string,
  workDir: string,
  maxBodyBytes: number,
): Promise<{
  proc: SluiceProcess;
  role: 'gateway' | 'peer';
  settings: Record<string, unknown>;
  adminUrl?: string;
}> {
  if (isWsFloor(cfg.implementation)) {
    const shape = floorShape(cfg.implementation);
    const argv = ['bench', 'ws-floor', '--port', '0', '--upstream', relayUrl, '--shape', shape];
    const proc = await spawnSluice(argv, { cpus: cfg.cpus });
    return { proc, role: 'peer', settings: {} };
  }
  if (cfg.implementation === 'fastify-rate-limit') {
    const proc = await spawnSluice(
      [
        'bench',
        'peer',
        '--port',
        '0',
        '--upstream',
        relayUrl,
        '--valkey-mode',
        cfg.mode,
        '--valkey-nodes',
        `${valkey.host}:${valkey.port}`,
        '--points',
        String(cfg.quota.points),
        '--window-sec',
        String(cfg.quota.windowSec),
        '--trusted-proxies',
        '127.0.0.1',
        // The same timeouts every sluice client gets (an unequal default is a confound).
        '--command-timeout-ms',
        String(BENCH_VALKEY_TIMEOUTS.commandTimeoutMs),
        '--connect-timeout-ms',
        String(BENCH_VALKEY_TIMEOUTS.connectTimeoutMs),
        '--max-body-bytes',
        String(maxBodyBytes),
      ],
      { cpus: cfg.cpus },
    );
    const settings = proc.ready.settings ?? {
      client: 'ioredis',
      mode: cfg.mode,
      ...BENCH_VALKEY_TIMEOUTS,
    };
    return { proc, role: 'peer', settings };
  }
  const { proc, adminUrl } = await startGateway(
    benchGatewayConfig(cfg, valkey, relayUrl, maxBodyBytes),
    path.join(workDir, 'gateway.json'),
    { cpus: cfg.cpus },
  );
  const v = await adminJson(adminUrl, '/admin/valkey');
  return {
    proc,
    role: 'gateway',
    settings: cfg.implementation === 'quotas-off' ? { quotas: 'off', ...v } : v,
    adminUrl,
  };
}

interface RunningRelay {
  /** http://...: the gateway's upstream; its WebSocket is the same URL as ws:. */
  url: string;
  pid: number;
  nodeId: string;
}

/** The relay of the run: the one given, else a fresh reference relay or a third-party one. */
async function relayForRun(
  cfg: RunConfig,
  targets: RunTargets,
  workDir: string,
  started: { stop(): Promise<unknown> }[],
  log: (line: string) => void,
): Promise<RunningRelay> {
  if (cfg.relayImpl && cfg.relayImpl !== 'reference') {
    if (targets.relayUrl) {
      throw new Error(
        `--relay is for a running reference relay; ${cfg.relayImpl} is started per run`,
      );
    }
    const kind = thirdPartyRelay(cfg.relayImpl);
    const relay = await kind.start(workDir, log, process.env, { cpus: cfg.cpus });
    started.push(relay);
    return { url: relay.url, pid: relay.pid, nodeId: relay.nodeId };
  }
  let relayUrl = targets.relayUrl;
  if (!relayUrl) {
    const relay = await startRelay({
      nodeId: 'relay-a',
      dataDir: path.join(workDir, 'relay'),
      fresh: true,
      workIterations: cfg.relayWorkIterations,
      cpus: cfg.cpus,
    });
    started.push(relay);
    relayUrl = relay.url;
  }
  const stats = await relayStats(relayUrl);
  if (stats.workIterations !== cfg.relayWorkIterations) {
    throw new Error(
      `the relay at ${relayUrl} does ${stats.workIterations} work iterations per write; this workload needs ${cfg.relayWorkIterations}`,
    );
  }
  return { url: relayUrl, pid: stats.pid, nodeId: stats.nodeId };
}

/** What every result file of a run starts with: its settings, start time and environment. */
export async function resultBase(cfg: RunConfig, targets: RunTargets) {
  return {
    schema: RESULT_SCHEMA,
    config: cfg,
    startedAt: new Date().toISOString(),
    ...(await environment(targets.valkey)),
  };
}

/** A process the run started, stopped when it ends (in reverse order), whatever happens. */
interface Stoppable {
  stop(): Promise<unknown>;
}

/** What runs during the measurement: the relay, the system under test, what is watched. */
interface SystemUnderTest {
  relay: RunningRelay;
  front: Awaited<ReturnType<typeof startFrontEnd>> | undefined;
  /** Valkey's nodes, counted and watched (none for relay-alone: no Valkey in the path). */
  nodes: ValkeyNode[];
  watched: WatchedProcess[];
  /** Where the load is sent: the front end's URL, else the relay's. */
  targetUrl: string;
}

interface Measured {
  result: LoadResult;
  processes: ReturnType<ProcessSampler['stop']>;
  valkey: RunResult['valkey'];
  leases: RunResult['leases'];
  /** This process's CPU over the window, ms: the load generator's (never among `processes`). */
  loadCpuMs: number;
  /** The cores each process (and the load generator) was allowed, read during the window. */
  affinity: NonNullable<RunResult['affinity']>;
}

/**
 * One run, in named phases: prepare (events to send), start processes, warm up, measure,
 * collect (the result file); what was started is stopped in every case.
 */
export async function runOnce(
  cfg: RunConfig,
  targets: RunTargets,
  log: (line: string) => void,
): Promise<RunResult> {
  const t0 = performance.now();
  const phase = (what: string) =>
    log(`  [${((performance.now() - t0) / 1000).toFixed(1)}s] ${what}`);
  const started: Stoppable[] = [];
  const workDir = mkdtempSync(path.join(os.tmpdir(), 'sluice-bench-run-'));
  const base = { ...(await resultBase(cfg, targets)), timeseries: null, adaptive: null };
  let clientSettings: Record<string, unknown> | null = null;
  try {
    const reads = workloadSpec(workloadOf(cfg)).reads;
    const pool = cfg.freshEvents || reads ? [] : eventPool(POOL_SIZE, cfg.seed);
    const stored = reads ? eventPool(READS.stored, cfg.seed, READS.contentBytes) : [];
    const budget = cfg.freshEvents
      ? new FreshBudget({ ...cfg, freshEvents: cfg.freshEvents }, phase)
      : undefined;
    await budget?.prepare();
    // The load generator, after the warm-up's events were signed (not timed: on every core),
    // before anything is started or measured; the window's signing threads inherit the cores.
    if (cfg.loadCpus?.length) pinPid(process.pid, cfg.loadCpus);
    const system = await startProcesses(cfg, targets, workDir, pool, stored, started, log, phase);
    clientSettings = system.front?.settings ?? null;
    const bodyFor = clientBodies(pool);
    const load = loadFor(cfg, {
      url: system.targetUrl,
      pool,
      bodyFor,
      fresh: () => budget?.events,
      headersFor: clientHeaders(cfg),
    });
    await warmUp(cfg, system, load, budget, bodyFor);
    phase('measuring');
    const measured = await measure(cfg, system, load);
    phase('measured');
    return collect(cfg, base, clientSettings, measured, load, budget);
  } catch (err) {
    return failedRun(base, err, clientSettings, log);
  } finally {
    await Promise.allSettled(started.reverse().map((p) => p.stop()));
    rmSync(workDir, { recursive: true, force: true });
  }
}

/** Start the relay (its pool preloaded) and the front end; name every process to watch. */
async function startProcesses(
  cfg: RunConfig,
  targets: RunTargets,
  workDir: string,
  pool: string[],
  stored: string[],
  started: Stoppable[],
  log: (line: string) => void,
  phase: (what: string) => void,
): Promise<SystemUnderTest> {
  const maxBodyBytes = 64 * 1024;
  const relay = await relayForRun(cfg, targets, workDir, started, log);
  if (pool.length > 0) await preload(relay.url, pool);
  // What a read load asks for, stored as any client would store it (every relay speaks this).
  if (stored.length > 0) await storeOverWebSocket(relay.url.replace(/^http/, 'ws'), stored);
  const loaded =
    pool.length > 0 ? ', pool loaded' : stored.length ? `, ${stored.length} events stored` : '';
  phase(`relay ready (${relay.nodeId})${loaded}`);
  const front =
    cfg.implementation === 'relay-alone'
      ? undefined
      : await startFrontEnd(cfg, targets.valkey, relay.url, workDir, maxBodyBytes);
  if (front) {
    started.push(front.proc);
    phase(`${front.role} ready`);
  }
  const nodes: ValkeyNode[] = front ? await discoverNodes(targets.valkey) : [];
  // Single box: what the session started and the run only uses (Valkey, a relay given by
  // --relay) shares the cores for the run, and gets its own affinity back when it ends.
  if (cfg.cpus?.length) {
    const borrowed = [
      ...(targets.relayUrl ? [relay.pid] : []),
      ...watchedValkey(nodes).map((v) => v.pid),
    ];
    const pinned = pinForRun(borrowed, cfg.cpus);
    started.unshift({ stop: () => Promise.resolve(pinned.restore()) });
    const what = ['relay', ...(front ? [front.role] : []), ...(nodes.length ? ['Valkey'] : [])];
    phase(`pinned to CPUs ${cfg.cpus.join(',')}: ${what.join(', ')}`);
  }
  const watched: WatchedProcess[] = [
    ...(front ? [{ role: front.role, name: front.role, pid: front.proc.pid }] : []),
    // A multi-worker gateway: the workers do the proxying, the primary (above) the admin.
    ...(front?.proc.ready.workers ?? []).map((pid) => ({
      role: 'gateway' as const,
      name: `gateway worker ${pid}`,
      pid,
    })),
    { role: 'relay', name: relay.nodeId, pid: relay.pid },
    ...watchedValkey(nodes),
  ];
  return { relay, front, nodes, watched, targetUrl: front ? front.proc.url : relay.url };
}

/** Who sends each request or connection: a key of the run's distribution. */
function clientHeaders(cfg: RunConfig): () => Record<string, string> {
  const pick = keySampler({
    keys: cfg.keys,
    distribution: cfg.distribution,
    zipfExponent: cfg.zipfExponent ?? 1,
    seed: cfg.seed + cfg.run,
  });
  // Whose API key each request carries, decided once (this runs per request).
  const keyOf =
    cfg.workload === 'flood'
      ? apiKeyOf
      : workloadSpec(workloadOf(cfg)).atLimit
        ? () => AT_LIMIT_SENDER_KEY
        : undefined;
  const address = addressOf(cfg);
  return (): Record<string, string> => {
    const i = pick();
    return keyOf
      ? { 'x-api-key': keyOf(i), 'x-forwarded-for': address(i) }
      : { 'x-forwarded-for': address(i) };
  };
}

function runLabel(cfg: RunConfig): string {
  return `${cfg.implementation}:${cfg.mode} ${cfg.workload} ${cfg.connections}c run ${cfg.run}/${cfg.runs}`;
}

/** Flooders over their limit first (flood), then the warm-up, then the window's events. */
async function warmUp(
  cfg: RunConfig,
  system: SystemUnderTest,
  load: Load,
  budget: FreshBudget | undefined,
  bodyFor: (client: string) => string,
): Promise<void> {
  // The flooders' first write comes from the run's turn of bodies: the load goes on from it.
  if (cfg.workload === 'flood') await exhaustFlooders(system.targetUrl, cfg, bodyFor);
  if (cfg.warmupSec === 0) return;
  const bar = progressBar(`${runLabel(cfg)} warm-up`, cfg.warmupSec);
  const warm = await load.run(cfg.warmupSec, (s) => bar.update(s));
  bar.done();
  await budget?.afterWarmup(warm);
}

/** The window: the load, every watched process sampled, Valkey's commands counted. */
async function measure(cfg: RunConfig, system: SystemUnderTest, load: Load): Promise<Measured> {
  const { front, nodes } = system;
  const before = front ? await commandCalls(nodes) : undefined;
  const sampler = new ProcessSampler(system.watched);
  sampler.start();
  const bar = progressBar(runLabel(cfg), cfg.durationSec);
  const cpuBefore = process.cpuUsage();
  const result = await load.run(cfg.durationSec, (s) => bar.update(s));
  const cpu = process.cpuUsage(cpuBefore);
  bar.done();
  const processes = sampler.stop();
  const affinity = affinityOf(system.watched);
  const after = before ? await commandCalls(nodes) : undefined;
  return {
    result,
    processes,
    valkey: before && after ? commandDelta(before, after, result.counts.requests) : null,
    // Leases: the gateway's accounting of its points, warm-up included (counters since start).
    leases:
      leases(cfg.implementation) && front?.adminUrl
        ? await fetchLeaseAccounting(front.adminUrl)
        : null,
    loadCpuMs: (cpu.user + cpu.system) / 1000,
    affinity,
  };
}

/** Each watched process's allowed cores, then the load generator's (this process). */
function affinityOf(watched: WatchedProcess[]): NonNullable<RunResult['affinity']> {
  const out: NonNullable<RunResult['affinity']> = [];
  for (const w of [
    ...watched,
    { role: 'load' as const, name: 'load generator', pid: process.pid },
  ]) {
    try {
      out.push({ role: w.role, name: w.name, pid: w.pid, cpus: allowedCpus(w.pid) });
    } catch {
      // Not on this host (a remote Valkey) or gone: nothing to record.
    }
  }
  return out;
}

/** Gateway processes that served the load: its workers (1 without any); null: no gateway. */
function gatewayWorkers(cfg: RunConfig, measured: Measured): number | null {
  if (!runsGateway(cfg.implementation)) return null;
  const workers = measured.processes.filter((p) => p.name.startsWith('gateway worker ')).length;
  return Math.max(1, workers);
}

/** The run's file from what was measured, with every reason it cannot be used. */
function collect(
  cfg: RunConfig,
  base: RunBase,
  clientSettings: Record<string, unknown> | null,
  measured: Measured,
  load: Load,
  budget: FreshBudget | undefined,
): RunResult {
  const { result } = measured;
  const arrival = 'load' in result ? (result as ArrivalLoadResult).load : null;
  const pastLimit = workloadSpec(workloadOf(cfg)).atLimit
    ? admittedPastLimit(load.storedByAuthor, AT_LIMIT.points, cfg.quota.points)
    : null;
  const reasons = [
    ...failureReasons(cfg, result),
    ...(arrival?.unsent
      ? [
          `${arrival.unsent} requests due at ${arrival.offeredRate}/s were never sent: every connection stayed busy (the offered rate is past what the system answers)`,
        ]
      : []),
    // At the limit, refusals outrun what was signed and the load stops early: its rate is no
    // throughput figure, and what it checks (pastLimit) holds over whatever was sent.
    ...(budget?.failures(load.exhausted && !pastLimit, load.duplicates) ?? []),
    ...(pastLimit ? pastLimitFailures(pastLimit) : []),
  ];
  return {
    ...base,
    status: reasons.length ? 'failed' : 'ok',
    failureReasons: reasons,
    clientSettings,
    finishedAt: new Date().toISOString(),
    wallSeconds: result.wallSeconds,
    counts: result.counts,
    rates: ratesOf(result.counts, result.wallSeconds),
    latencyMs: result.latencyMs,
    // closed: each connection waits for its answer (latency from send); arrival: a fixed
    // offered rate, latency from each request's intended send time.
    load: arrival ?? { mode: 'closed' },
    processes: withCpuPerRequest(measured.processes, result.counts.requests),
    valkey: measured.valkey,
    leases: measured.leases,
    events: budget?.summary(load.duplicates) ?? null,
    reads: result.reads
      ? {
          stored: READS.stored,
          limit: READS.limit,
          events: result.reads.events,
          eventsPerSec: Number((result.reads.events / result.wallSeconds).toFixed(1)),
        }
      : null,
    pastLimit,
    gatewayWorkers: gatewayWorkers(cfg, measured),
    affinity: measured.affinity,
    loadGenerator: {
      cpuMs: Math.round(measured.loadCpuMs),
      cpuMsPerRequest: result.counts.requests
        ? Number((measured.loadCpuMs / result.counts.requests).toFixed(4))
        : null,
    },
  };
}
