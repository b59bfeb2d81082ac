/**
 * Two front ends measured side by side in one run (`sluice bench pair`): both under the HTTP
 * `light` load at the same time, on one reference relay and one Valkey, so that whatever the
 * machine does to one (other tenants, frequency, the scheduler) it does to the other. Sequential
 * runs of one configuration move by a third here; the ratio of two measured at once moves by a
 * few percent.
 *
 * The two slots are not alike (the first gateway started, the first load's connections): two
 * identical front ends differ by 2-5% in rate a round, and up to 15% when the scheduler places
 * them unevenly. So a pair runs in orders, A in the first slot then B, each time with fresh
 * processes, and the figure is the geometric mean of every round's ratio, in which a slot's own
 * advantage cancels.
 *
 * Pinned (`gatewayCpus`, `loadCpus`), both gateways share the same cores under one scheduler
 * while the relay and the load run on others: neither slot is placed better, and each gateway's
 * rate follows its own CPU a request. That removes the placement noise (see BENCHMARKS.md,
 * "Side by side in one run").
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { allowedCpus, pinPid } from '../harness/pinning.js';
import { startGateway, startRelay } from '../harness/processes.js';
import type { NodeAddress } from '../store/options.js';
import { clientBodies } from './run/client-bodies.js';
import { clientOf, isWsFloor, parseTarget } from './run/config.js';
import type { RunConfig } from './run/config.js';
import { eventPool, preload } from './run/event-pool.js';
import { benchGatewayConfig } from './run/gateway-config.js';
import { runHttpLoad } from './run/http-load.js';
import { clientAddress, keySampler } from './run/keys.js';
import { ProcessSampler } from './run/proc-sampler.js';

export interface PairOptions {
  /** Implementations as `bench run` names them (quotas-off, iovalkey+lease, ...). */
  a: string;
  b: string;
  valkey: NodeAddress;
  /** Connections of each front end's load. */
  connections: number;
  keys: number;
  warmupSec: number;
  durationSec: number;
  /** Measured windows per slot order. */
  rounds: number;
  /** Slot orders, alternating (A first, B first, ...); 2 unless set. */
  orders?: number;
  /** Cores both gateways run on (taskset); null: wherever the scheduler puts them. */
  gatewayCpus?: readonly number[] | null;
  /** Cores of the relay and of this process (the load); its affinity is given back after. */
  loadCpus?: readonly number[] | null;
  log?: (line: string) => void;
}

export interface SideFigures {
  requestsPerSec: number;
  /** The front end's CPU over the window per request it answered. */
  cpuMsPerRequest: number;
  /** Answers other than 2xx, and errors: a pair with any is not a fair comparison. */
  failed: number;
  /** The cores the gateway could run on during the round (Cpus_allowed_list). */
  cpus: string;
}

export interface PairRound {
  /** Which implementation had the first slot. */
  first: 'a' | 'b';
  a: SideFigures;
  b: SideFigures;
  /** b's over a's. */
  rateRatio: number;
  cpuRatio: number;
}

export interface PairResult {
  a: string;
  b: string;
  /** Where the gateways, and the relay and load, were pinned (null: not pinned). */
  gatewayCpus: number[] | null;
  loadCpus: number[] | null;
  rounds: PairRound[];
  /** Geometric means over every round of every order: b's rate (CPU a request) over a's. */
  rateRatio: number;
  cpuRatio: number;
}

const POOL_SIZE = 500;
const MAX_BODY_BYTES = 64 * 1024;
const QUOTA = { points: 6000, windowSec: 60 };

/** The `bench run` configuration of one side (what its gateway is configured from). */
function sideConfig(name: string, opts: PairOptions): RunConfig {
  const { implementation, mode } = parseTarget(name);
  if (implementation === 'relay-alone' || isWsFloor(implementation)) {
    throw new Error(`${name} is not an HTTP front end: bench pair compares gateways over HTTP`);
  }
  if (implementation === 'fastify-rate-limit') {
    throw new Error('bench pair runs sluice gateways (quotas off, or a Valkey client)');
  }
  return {
    implementation,
    client: clientOf(implementation),
    mode,
    workload: 'light',
    transport: 'http',
    connections: opts.connections,
    durationSec: opts.durationSec,
    warmupSec: opts.warmupSec,
    run: 1,
    runs: 1,
    keys: opts.keys,
    distribution: 'uniform',
    zipfExponent: null,
    floodShare: null,
    quota: QUOTA,
    inMemoryBlock: true,
    relayWorkIterations: 0,
    law: null,
    seed: 1,
    relayImpl: 'reference',
    freshEvents: null,
    workers: 1,
    cpus: null,
    loadCpus: null,
    rate: null,
  };
}

/** Geometric mean: the mean of ratios whose inverses are as likely as they. */
export function geometricMean(values: readonly number[]): number {
  if (values.length === 0) throw new RangeError('no values');
  return Math.exp(values.reduce((sum, v) => sum + Math.log(v), 0) / values.length);
}

export async function runPair(opts: PairOptions): Promise<PairResult> {
  const configs = { a: sideConfig(opts.a, opts), b: sideConfig(opts.b, opts) };
  if (configs.a.mode !== configs.b.mode) {
    throw new Error('bench pair: both sides on one Valkey topology (one --valkey)');
  }
  const orders = opts.orders ?? 2;
  if (!(Number.isInteger(orders) && orders >= 1)) throw new RangeError('orders must be >= 1');
  const rounds: PairRound[] = [];
  // The load runs in this process: pinned for the pair, then given its cores back.
  const loadCpus = opts.loadCpus?.length ? opts.loadCpus : undefined;
  const ownCpus = loadCpus && allowedCpus(process.pid);
  if (loadCpus) pinPid(process.pid, loadCpus);
  try {
    for (let i = 0; i < orders; i++) {
      rounds.push(...(await oneOrder(configs, i % 2 === 0 ? 'a' : 'b', opts)));
    }
  } finally {
    if (ownCpus) pinPid(process.pid, ownCpus);
  }
  return {
    a: opts.a,
    b: opts.b,
    gatewayCpus: opts.gatewayCpus?.length ? [...opts.gatewayCpus] : null,
    loadCpus: loadCpus ? [...loadCpus] : null,
    rounds,
    rateRatio: geometricMean(rounds.map((r) => r.rateRatio)),
    cpuRatio: geometricMean(rounds.map((r) => r.cpuRatio)),
  };
}

/** One relay and two fresh gateways, `first`'s started first; warm-up, then the rounds. */
async function oneOrder(
  configs: { a: RunConfig; b: RunConfig },
  first: 'a' | 'b',
  opts: PairOptions,
): Promise<PairRound[]> {
  const log = opts.log ?? (() => undefined);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'sluice-bench-pair-'));
  const stops: (() => Promise<unknown>)[] = [];
  try {
    const relay = await startRelay({
      nodeId: 'relay-a',
      dataDir: path.join(dir, 'relay'),
      fresh: true,
      workIterations: 0,
      cpus: opts.loadCpus ?? null,
    });
    stops.push(() => relay.stop());
    const pool = eventPool(POOL_SIZE, 1);
    await preload(relay.url, pool);
    const order = first === 'a' ? (['a', 'b'] as const) : (['b', 'a'] as const);
    const fronts = {} as Record<'a' | 'b', { url: string; pid: number }>;
    for (const side of order) {
      const gw = await startGateway(
        benchGatewayConfig(configs[side], opts.valkey, relay.url, MAX_BODY_BYTES),
        path.join(dir, `gateway-${side}.json`),
        { cpus: opts.gatewayCpus ?? null },
      );
      stops.push(() => gw.proc.stop());
      fronts[side] = { url: gw.url, pid: gw.proc.pid };
    }
    const loadOf = (side: 'a' | 'b', seed: number) => {
      const pick = keySampler({ keys: opts.keys, distribution: 'uniform', zipfExponent: 1, seed });
      const bodyFor = clientBodies(pool);
      return (durationSec: number) =>
        runHttpLoad({
          url: fronts[side].url,
          connections: opts.connections,
          durationSec,
          bodyFor,
          headersFor: () => ({ 'x-forwarded-for': clientAddress(pick()) }),
        });
    };
    // Each load in slot order: the first slot's first, whichever side holds it.
    const loads = order.map((side, i) => ({ side, run: loadOf(side, 11 + i) }));
    log(`  ${order.join(' then ')}: warm-up ${opts.warmupSec}s`);
    await Promise.all(loads.map((l) => l.run(opts.warmupSec)));
    const rounds: PairRound[] = [];
    for (let r = 0; r < opts.rounds; r++) {
      const sampler = new ProcessSampler(
        order.map((side) => ({ role: 'gateway' as const, name: side, pid: fronts[side].pid })),
      );
      const cpus = order.map((side) => allowedCpus(fronts[side].pid));
      sampler.start();
      const results = await Promise.all(loads.map((l) => l.run(opts.durationSec)));
      const usage = sampler.stop();
      const figures = {} as Record<'a' | 'b', SideFigures>;
      order.forEach((side, i) => {
        const { counts } = results[i]!;
        const answered = counts.ok2xx;
        figures[side] = {
          requestsPerSec: answered / opts.durationSec,
          cpuMsPerRequest: (usage[i]!.cpuMs ?? NaN) / answered,
          failed: counts.requests - counts.ok2xx,
          cpus: cpus[i]!,
        };
      });
      const round: PairRound = {
        first,
        ...figures,
        rateRatio: figures.b.requestsPerSec / figures.a.requestsPerSec,
        cpuRatio: figures.b.cpuMsPerRequest / figures.a.cpuMsPerRequest,
      };
      log(
        `  ${first} first, round ${r + 1}: b/a rate ${round.rateRatio.toFixed(3)}, CPU a request ${round.cpuRatio.toFixed(3)}`,
      );
      rounds.push(round);
    }
    return rounds;
  } finally {
    for (const stop of stops.reverse()) await stop().catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  }
}
