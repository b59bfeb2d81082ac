/**
 * The validation run: the configuration the simulation ran, for real. One decider per
 * gateway process in this process, each with its own client to a real Valkey Cluster, on
 * the real clock, driven by the same traffic (same draws from the same seed), its figures
 * taken the same way; Valkey's commands per primary from INFO commandstats (script calls).
 * Keep it short of one quota window: every key then has one window, the same on both sides.
 */
import { QuotaDecider } from '../../quota/decider.js';
import type { LeaseEvent } from '../../quota/leases.js';
import type { NodeMultipliers } from '../../quota/multipliers.js';
import { Policy } from '../../quota/policy.js';
import { createStore } from '../../store/index.js';
import type { ClientKind, NodeAddress, Store } from '../../store/index.js';
import { openNodeConnection } from '../../store/node.js';
import { seededRandom } from '../../util/random.js';
import { parseClusterNodes } from '../../valkey/cluster.js';
import { parseCommandStats } from '../run/valkey-stats.js';
import { addWindow, emptyAccuracy, meanMax } from './figures.js';
import type { AccuracyTally } from './figures.js';
import { quotaSettings } from './config.js';
import type { ScaleConfig } from './config.js';
import { AdmissionLedger } from './ledger.js';
import { DecisionRecorder, writeRequest } from './recorder.js';
import { faultAt, trafficSeed } from './simulation.js';
import { keySlot } from './slots.js';
import { HOT_KEY, drawWrite, writesDue } from './traffic.js';
import { underBound, windowOverBound } from './bound.js';

const NODE = 'relay-a';
const SCRIPT_COMMANDS = ['eval', 'evalsha', 'eval_ro', 'evalsha_ro', 'fcall', 'fcall_ro'];
/** Epoch ms with a fraction: the ledger's and the latencies' one time base. */
const clock = () => performance.timeOrigin + performance.now();
const BOARD: NodeMultipliers = { get: () => ({ value: 1 }), onChange: () => undefined };
/**
 * The probe beside the run: GETs on the slots the writes go to, from a client of the same
 * kind in this process, timed as decisions are. Its round trips are the host's and the
 * network's as the run met them (this machine's scheduling, the client's own work): the
 * simulation compared with the run draws its round trips from them (HopLatency.roundTripsMs).
 */
const PROBES_PER_SEC = 500;

export interface RealScaleResult {
  config: ScaleConfig;
  wallSec: number;
  writes: number;
  admitted: number;
  accuracy: AccuracyTally & { underPct: number };
  /** Script calls per primary (ordered by their first slot, as the model numbers them). */
  scriptCallsPerShard: number[];
  commandsPerSecPerShard: number[];
  latencyMs: { p50: number; p99: number; p999: number; max: number };
  outcomes: Record<string, number>;
  strandedPerGateway: { mean: number; max: number };
  /**
   * The probe's round trips (ms, in the order measured), how many failed, and how many met
   * the fault (left out: the model has the fault itself).
   */
  probe: { roundTripsMs: number[]; failed: number; metFault: number };
}

interface Primary {
  address: NodeAddress;
  /** Slot ranges [first, last] it serves. */
  ranges: [number, number][];
}

/** The primaries of a cluster, ordered by the first slot each serves. */
async function primaries(seed: NodeAddress): Promise<Primary[]> {
  const conn = await openNodeConnection(seed);
  try {
    const views = parseClusterNodes(String(await conn.call('CLUSTER', 'NODES')));
    return views
      .filter((v) => v.role === 'primary' && v.slots.length > 0)
      .map((v) => ({
        address: { host: seed.host, port: v.port },
        ranges: v.slots.map((r): [number, number] => {
          const [a, b] = r.split('-').map(Number);
          return [a!, b ?? a!];
        }),
      }))
      .sort((a, b) => a.ranges[0]![0] - b.ranges[0]![0]);
  } finally {
    conn.close();
  }
}

/** Pause the clients of the primary serving the hot key (CLIENT PAUSE ALL). */
async function pauseHotPrimary(shards: Primary[], ms: number): Promise<void> {
  const slot = keySlot(HOT_KEY);
  const owner = shards.find((p) => p.ranges.some(([a, b]) => slot >= a && slot <= b));
  if (!owner) throw new Error(`no primary serves slot ${slot}`);
  const conn = await openNodeConnection(owner.address);
  try {
    await conn.call('CLIENT', 'PAUSE', String(ms), 'ALL');
  } finally {
    conn.close();
  }
}

async function scriptCalls(nodes: NodeAddress[]): Promise<number[]> {
  return Promise.all(
    nodes.map(async (address) => {
      const conn = await openNodeConnection(address);
      try {
        const stats = parseCommandStats(String(await conn.call('INFO', 'commandstats')));
        return SCRIPT_COMMANDS.reduce((sum, c) => sum + (stats[c] ?? 0), 0);
      } finally {
        conn.close();
      }
    }),
  );
}

export async function runReal(
  cfg: ScaleConfig,
  seed: NodeAddress,
  client: ClientKind,
  autoPipelining = true,
): Promise<RealScaleResult> {
  const windowMs = cfg.windowSec * 1000;
  const run = { ...cfg, keyPrefix: `sluice-scale-${Date.now()}`, judgeOpenWindows: true };
  const terms = {
    limit: cfg.limit,
    gateways: cfg.gateways,
    workers: cfg.workers,
    leases: cfg.leases,
  };
  const accuracy = emptyAccuracy();
  const ledger = new AdmissionLedger(windowMs, (_k, w, complete) =>
    addWindow(
      accuracy,
      w,
      complete,
      cfg.limit,
      windowOverBound(terms, 0, w.insured > 0, w.end - w.start, windowMs),
      underBound(terms),
    ),
  );
  const shards = await primaries(seed);
  const holders = cfg.gateways * cfg.workers;
  const stores: Store[] = [];
  for (let h = 0; h < holders; h++) {
    stores.push(
      await createStore({
        client,
        mode: 'cluster',
        nodes: [seed],
        timeouts: { commandMs: cfg.timeoutMs },
        autoPipelining,
        clientName: `sluice-scale-${h}`,
      }),
    );
  }
  const prober = await createStore({
    client,
    mode: 'cluster',
    nodes: [seed],
    timeouts: { commandMs: cfg.timeoutMs },
    autoPipelining,
    clientName: 'sluice-scale-probe',
  });
  const probe = { roundTripsMs: [] as number[], failed: 0, metFault: 0 };
  const settings = quotaSettings(run);
  const policy = new Policy(settings);
  const held = new Float64Array(holders);
  const deciders = stores.map(
    (store, h) =>
      new QuotaDecider(store, policy, BOARD, settings, {
        workers: cfg.workers,
        maxTrackedClients: cfg.maxTrackedClients,
        onLeasePoints: (e: LeaseEvent, n: number) => {
          held[h] = (held[h] ?? 0) + (e === 'leased' || e === 'refunded' ? n : -n);
        },
      }),
  );
  const recorder = new DecisionRecorder(ledger, 0.01);
  const seen = new Set<string>();
  const before = await scriptCalls(shards.map((p) => p.address));
  const random = seededRandom(trafficSeed(cfg.seed));
  const pending = new Set<Promise<void>>();
  const started = clock();
  const endAt = started + cfg.durationSec * 1000;
  // The model has the fault itself: round trips that met it stay out of its samples.
  const faultFrom = cfg.failover ? started + faultAt(cfg) : Infinity;
  const faultTo = faultFrom + cfg.failoverPauseMs;
  let carry = 0;
  let probeCarry = 0;
  // Each probe goes with a write (to its slot): at most one a write.
  const probesPerSec = Math.min(PROBES_PER_SEC, cfg.writesPerSec / 2);
  let last = started;
  if (cfg.failover) {
    if (!cfg.pauseOnly)
      throw new RangeError('a real run pauses a primary (pauseOnly), never fails one');
    setTimeout(() => void pauseHotPrimary(shards, cfg.failoverPauseMs), faultAt(cfg)).unref();
  }
  await new Promise<void>((resolve) => {
    const timer = setInterval(() => {
      const now = clock();
      if (now >= endAt) {
        clearInterval(timer);
        resolve();
        return;
      }
      const [n, rest] = writesDue(carry, cfg.writesPerSec, now - last);
      const [probes, probeRest] = writesDue(probeCarry, probesPerSec, now - last);
      carry = rest;
      probeCarry = probeRest;
      last = now;
      for (let i = 0; i < n; i++) {
        const w = drawWrite(random, cfg, now - started);
        if (!seen.has(w.client)) {
          seen.add(w.client);
          ledger.windowStarted(w.client, now, now + windowMs);
        }
        const asked = clock();
        const decided = deciders[w.holder]!.decide(writeRequest(w.client, NODE));
        if (i < probes) sendProbe(w.client);
        // A verdict from memory is the decider's value itself: decided when it returns.
        if (!(decided instanceof Promise)) {
          recorder.record(w.client, decided, asked, clock(), undefined);
          continue;
        }
        const p = decided.then((d) => {
          recorder.record(w.client, d, asked, clock(), undefined);
          pending.delete(p);
        });
        pending.add(p);
      }
    }, 1);
  });
  function sendProbe(client: string): void {
    const asked = clock();
    const p = prober.kv.get(`${run.keyPrefix}:probe:${client}`).then(
      () => {
        const answered = clock();
        if (answered < faultFrom || asked > faultTo) probe.roundTripsMs.push(answered - asked);
        else probe.metFault++;
      },
      () => probe.failed++,
    );
    const settled: Promise<void> = p.then(() => {
      pending.delete(settled);
    });
    pending.add(settled);
  }
  await Promise.allSettled([...pending]);
  const wallSec = (clock() - started) / 1000;
  const stranded = meanMax([...held]);
  const after = await scriptCalls(shards.map((p) => p.address));
  for (const d of deciders) await d.close();
  for (const s of stores) await s.close();
  await prober.close();
  ledger.finish(Infinity);
  const calls = after.map((a, i) => a - before[i]!);
  return {
    config: cfg,
    wallSec,
    writes: recorder.writes,
    admitted: recorder.admitted,
    accuracy: {
      ...accuracy,
      underPct: accuracy.admissible > 0 ? (100 * accuracy.underPoints) / accuracy.admissible : 0,
    },
    scriptCallsPerShard: calls,
    commandsPerSecPerShard: calls.map((c) => c / cfg.durationSec),
    latencyMs: recorder.latencyFigures(),
    outcomes: recorder.outcomes,
    strandedPerGateway: stranded,
    probe,
  };
}
