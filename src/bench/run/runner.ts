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
import { leases } from './config.js';
import type { RunConfig } from './config.js';
import { fetchLeaseAccounting } from './lease-accounting.js';
import { eventPool, preload } from './event-pool.js';
import { BENCH_ADMIN_TOKEN, BENCH_VALKEY_TIMEOUTS, benchGatewayConfig } from './gateway-config.js';
import { runHttpLoad } from './http-load.js';
import { runArrivalLoad } from './arrival-load.js';
import type { ArrivalLoadResult } from './arrival-load.js';
import type { LoadResult } from './http-load.js';
import { apiKeyOf, clientAddress, keySampler } from './keys.js';
import { ProcessSampler, withCpuPerRequest } from './proc-sampler.js';
import type { WatchedProcess } from './proc-sampler.js';
import { progressBar } from './progress.js';
import { commandCalls, commandDelta, discoverNodes, watchedValkey } from './valkey-stats.js';
import type { ValkeyNode } from './valkey-stats.js';
import { GRACE_MS, runNostrLoad } from '../ws-load.js';
import { environment } from './environment.js';
import { RESULT_SCHEMA, ratesOf } from './result-schema.js';
import type { RunFile } from './result-schema.js';
import { signFreshEvents } from './fresh-events.js';
import type { FreshEvents } from './fresh-events.js';
import { startNostrRsRelay } from './third-party-relay.js';

const POOL_SIZE = 500;

export interface RunTargets {
  /** Any node of the topology the run uses. */
  valkey: NodeAddress;
  /** A relay already running (its /stats must match the workload); otherwise one is started. */
  relayUrl?: string;
}

/** One run's file, as its schema (result-schema.ts) defines it. */
export type RunResult = RunFile;

function roundAll<T extends object>(values: T): T {
  return Object.fromEntries(
    Object.entries(values).map(([k, v]) => [k, Number((v as number).toFixed(3))]),
  ) as T;
}

/** Nostr rejections other than rate-limited, in the shape HTTP statuses take. */
function otherStatuses(otherRejected: number): Record<string, number> {
  return otherRejected ? { 'OK false': otherRejected } : {};
}

/** One write from each flooder, so all of them start the run over their limit. */
async function exhaustFlooders(url: string, cfg: RunConfig, body: string): Promise<void> {
  const flooders = Math.floor((cfg.floodShare ?? 0) * cfg.keys);
  let next = 0;
  const worker = async () => {
    while (next < flooders) {
      const i = next++;
      const res = await fetch(`${url}/events`, {
        method: 'POST',
        body,
        headers: {
          'content-type': 'application/json',
          'x-api-key': apiKeyOf(i),
          'x-forwarded-for': clientAddress(i),
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
  if (cfg.freshEvents && c.limited429 > 0) {
    reasons.push(
      `${c.limited429} rate-limited answers: the Nostr throughput workload must not meet a quota ` +
        `(raise --quota-points, now ${cfg.quota.points} per ${cfg.quota.windowSec} s)`,
    );
  }
  return reasons;
}

/** Why a fresh-event Nostr run cannot be used: events ran out, or some were not new. */
export function freshFailures(
  cfg: RunConfig,
  fresh: FreshEvents,
  exhausted: boolean,
  duplicates: number,
  windowRate?: number,
): string[] {
  const reasons: string[] = [];
  if (exhausted) {
    reasons.push(
      `ran out of pre-signed events: all ${fresh.ids.length} were sent before the window ended ` +
        `(signed for ${windowRate ?? cfg.freshEvents?.maxPerSec}/s: ${WINDOW_HEADROOM} x the ` +
        `warm-up's rate, at most --fresh-events-per-sec ${cfg.freshEvents?.maxPerSec})`,
    );
  }
  if (duplicates > 0) reasons.push(`${duplicates} OKs said duplicate: events were not new`);
  return reasons;
}

/**
 * The window's fresh events are signed for this many times the warm-up's rate (at most
 * --fresh-events-per-sec, at least MIN_WINDOW_RATE): a window is not 3x faster than the
 * warm-up before it, and signing at the upper rate for long windows costs minutes.
 */
export const WINDOW_HEADROOM = 3;
export const MIN_WINDOW_RATE = 1000;

/** Events to sign for `seconds` of load at `perSec` (plus the grace period and one each). */
export function freshEventCount(perSec: number, seconds: number, connections: number): number {
  return Math.ceil(perSec * (seconds + GRACE_MS / 1000)) + connections;
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
  if (cfg.implementation === 'fastify-rate-limit') {
    const proc = await spawnSluice([
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
    ]);
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

/** The relay of the run: the one given, else a fresh reference relay or nostr-rs-relay. */
async function relayForRun(
  cfg: RunConfig,
  targets: RunTargets,
  workDir: string,
  started: { stop(): Promise<unknown> }[],
  log: (line: string) => void,
): Promise<RunningRelay> {
  if (cfg.relayImpl === 'nostr-rs-relay') {
    if (targets.relayUrl) {
      throw new Error(
        '--relay is for a running reference relay; nostr-rs-relay is started per run',
      );
    }
    const relay = await startNostrRsRelay(workDir, log);
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

export async function runOnce(
  cfg: RunConfig,
  targets: RunTargets,
  log: (line: string) => void,
): Promise<RunResult> {
  const t0 = performance.now();
  const phase = (what: string) =>
    log(`  [${((performance.now() - t0) / 1000).toFixed(1)}s] ${what}`);
  const started: { stop(): Promise<unknown> }[] = [];
  const workDir = mkdtempSync(path.join(os.tmpdir(), 'sluice-bench-run-'));
  const base = { ...(await resultBase(cfg, targets)), timeseries: null, adaptive: null };
  let clientSettings: Record<string, unknown> | null = null;
  try {
    const pool = cfg.freshEvents ? [] : eventPool(POOL_SIZE, cfg.seed);
    const maxBodyBytes = 64 * 1024;
    const relay = await relayForRun(cfg, targets, workDir, started, log);
    if (!cfg.freshEvents) await preload(relay.url, pool);
    phase(`relay ready (${relay.nodeId})${cfg.freshEvents ? '' : ', pool loaded'}`);

    let fresh: FreshEvents | undefined;
    let signSeconds = 0;
    /** Signed before the load that uses them starts; never re-sent (see fresh-events.ts). */
    const signFresh = async (count: number, what: string) => {
      const t = performance.now();
      const more = await signFreshEvents({
        count,
        authors: cfg.freshEvents!.authors,
        seed: cfg.seed,
        label: `${cfg.implementation}:${cfg.mode} ${cfg.workload} ${cfg.relayImpl ?? 'reference'} ${cfg.connections}c ${cfg.durationSec}s run ${cfg.run} ${what}`,
      });
      const seconds = (performance.now() - t) / 1000;
      signSeconds += seconds;
      fresh = fresh
        ? {
            ids: fresh.ids.concat(more.ids),
            events: fresh.events.concat(more.events),
            next: fresh.next,
          }
        : more;
      phase(
        `${count} fresh events for the ${what} signed by ${cfg.freshEvents!.authors} keys in ${seconds.toFixed(1)} s`,
      );
    };
    let windowRate: number | undefined;
    if (cfg.freshEvents) {
      const maxPerSec = cfg.freshEvents.maxPerSec;
      await signFresh(
        cfg.warmupSec > 0
          ? freshEventCount(maxPerSec, cfg.warmupSec, cfg.connections)
          : freshEventCount(maxPerSec, cfg.durationSec, cfg.connections),
        cfg.warmupSec > 0 ? 'warm-up' : 'window',
      );
      if (cfg.warmupSec === 0) windowRate = maxPerSec;
    }

    const front =
      cfg.implementation === 'relay-alone'
        ? undefined
        : await startFrontEnd(cfg, targets.valkey, relay.url, workDir, maxBodyBytes);
    if (front) {
      started.push(front.proc);
      clientSettings = front.settings;
      phase(`${front.role} ready`);
    }
    // relay-alone: no Valkey in the path, none watched or counted.
    const nodes: ValkeyNode[] = front ? await discoverNodes(targets.valkey) : [];
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
    const targetUrl = front ? front.proc.url : relay.url;

    const pick = keySampler({
      keys: cfg.keys,
      distribution: cfg.distribution,
      zipfExponent: cfg.zipfExponent ?? 1,
      seed: cfg.seed + cfg.run,
    });
    const headersFor = (): Record<string, string> => {
      const i = pick();
      return cfg.workload === 'flood'
        ? { 'x-api-key': apiKeyOf(i), 'x-forwarded-for': clientAddress(i) }
        : { 'x-forwarded-for': clientAddress(i) };
    };
    let exhausted = false;
    let duplicates = 0;
    const load = (seconds: number, onTick?: (s: number) => void): Promise<LoadResult> =>
      cfg.transport === 'websocket'
        ? runNostrLoad({
            url: targetUrl.replace(/^http/, 'ws'),
            connections: cfg.connections,
            durationSec: seconds,
            events: pool,
            ...(fresh ? { fresh } : {}),
            headersFor: () => headersFor(),
            onProgress: onTick,
          })
            .then((r) => {
              exhausted ||= r.exhausted;
              duplicates += r.counts.duplicates;
              return r;
            })
            .then((r) => ({
              wallSeconds: r.wallSeconds,
              counts: {
                requests: r.counts.requests,
                ok2xx: r.counts.ok,
                limited429: r.counts.limited,
                otherNon2xx: r.counts.otherRejected,
                errors: r.counts.errors + r.counts.timeouts,
                timeouts: r.counts.timeouts,
                otherStatuses: otherStatuses(r.counts.otherRejected),
              },
              latencyMs: r.latencyMs && roundAll(r.latencyMs),
            }))
        : cfg.rate
          ? runArrivalLoad({
              url: targetUrl,
              rate: cfg.rate,
              connections: cfg.connections,
              durationSec: seconds,
              bodies: pool,
              headersFor,
              onTick,
            })
          : runHttpLoad({
              url: targetUrl,
              connections: cfg.connections,
              durationSec: seconds,
              bodies: pool,
              headersFor,
              onTick,
            });

    if (cfg.workload === 'flood') {
      await exhaustFlooders(targetUrl, cfg, pool[0]!);
      phase('flooders over their limit');
    }
    const label = `${cfg.implementation}:${cfg.mode} ${cfg.workload} ${cfg.connections}c run ${cfg.run}/${cfg.runs}`;
    if (cfg.warmupSec > 0) {
      const bar = progressBar(`${label} warm-up`, cfg.warmupSec);
      const warm = await load(cfg.warmupSec, (s) => bar.update(s));
      bar.done();
      if (cfg.freshEvents) {
        // The window's events, for WINDOW_HEADROOM x the warm-up's rate (a window that sends
        // more fails: it never re-sends an id).
        const measured = warm.counts.requests / warm.wallSeconds;
        windowRate = Math.min(
          cfg.freshEvents.maxPerSec,
          Math.max(MIN_WINDOW_RATE, Math.ceil(WINDOW_HEADROOM * measured)),
        );
        const left = fresh!.ids.length - fresh!.next;
        const need = freshEventCount(windowRate, cfg.durationSec, cfg.connections);
        if (need > left) await signFresh(need - left, 'window');
      }
    }
    phase('measuring');
    const before = front ? await commandCalls(nodes) : undefined;
    const sampler = new ProcessSampler(watched);
    sampler.start();
    const bar = progressBar(label, cfg.durationSec);
    const result = await load(cfg.durationSec, (s) => bar.update(s));
    bar.done();
    const processes = sampler.stop();
    const after = before ? await commandCalls(nodes) : undefined;
    // Leases: the gateway's accounting of its points, warm-up included (counters since start).
    const leaseBook =
      leases(cfg.implementation) && front?.adminUrl
        ? await fetchLeaseAccounting(front.adminUrl)
        : null;
    phase('measured');
    const arrival = 'load' in result ? (result as ArrivalLoadResult).load : null;
    const reasons = [
      ...failureReasons(cfg, result),
      ...(arrival?.unsent
        ? [
            `${arrival.unsent} requests due at ${arrival.offeredRate}/s were never sent: every connection stayed busy (the offered rate is past what the system answers)`,
          ]
        : []),
      ...(fresh ? freshFailures(cfg, fresh, exhausted, duplicates, windowRate) : []),
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
      processes: withCpuPerRequest(processes, result.counts.requests),
      valkey: before && after ? commandDelta(before, after, result.counts.requests) : null,
      leases: leaseBook,
      events: fresh
        ? {
            source: 'fresh',
            signed: fresh.ids.length,
            signSeconds,
            sent: fresh.next,
            duplicates,
            windowRatePerSec: windowRate ?? null,
          }
        : null,
    };
  } catch (err) {
    return failedRun(base, err, clientSettings, log);
  } finally {
    await Promise.allSettled(started.reverse().map((p) => p.stop()));
    rmSync(workDir, { recursive: true, force: true });
  }
}
