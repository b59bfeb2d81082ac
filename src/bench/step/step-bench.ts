/**
 * `sluice bench step`: the step response of each control law on a real closed loop (issue
 * 30, part 3). Per law and per disturbance, on fresh processes: a reference relay (memory
 * follows its backlog, drained at a set rate), a feed beside it running the law, two
 * gateways with pressure on, one writer (one client identity, its quota `overload` x what
 * the relay sustains) offering at its own pace whatever the answers. A held allocation first
 * lifts the relay to `level` x target (a relay that holds data); then, `preSec` in:
 * - step: the offer goes from half of sustainable to `overload` x sustainable (a flood);
 * - spike: the relay allocates a share of what is left below target, held `spikeHoldSec`;
 * - degrade: the relay's drain is cut to `degradeFactor` (the offer stays 0.9 x sustainable).
 * Memory / target, the multiplier and the writes accepted are sampled every 250 ms, and the
 * figures of ./figures.ts computed from them.
 */
import http from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { initNostrWasm } from 'nostr-wasm';
import { generateSecretKey } from 'nostr-tools/pure';
import type { LawName } from '../../pressure/laws/registry.js';
import { startFeed, startRelay } from '../../harness/processes.js';
import type { SluiceProcess } from '../../harness/processes.js';
import type { NodeAddress } from '../../store/index.js';
import type { ClientKind } from '../../store/options.js';
import { emergencyTransitions, readFlow, startPressureGateways } from '../run/adaptive-gateways.js';
import type { BenchGateway } from '../run/adaptive-gateways.js';
import { postEvent } from '../run/post-event.js';
import { withBenchValkey } from '../own-valkey.js';
import { figureText, stepFigures } from './figures.js';
import type { StepFigures, StepWindow } from './figures.js';

const MiB = 1024 * 1024;
const NODE = 'relay-a';
const RELAY_ADMIN_TOKEN = 'bench-relay-admin-token-0123456789';
const SAMPLE_MS = 250;
const MAX_IN_FLIGHT = 64;
/** The writer's address: the gateway tells clients apart by address. */
const WRITER_FROM = '127.0.40.1';

export type Disturbance = 'step' | 'spike' | 'degrade';
export const DISTURBANCES: readonly Disturbance[] = ['step', 'spike', 'degrade'];

export interface StepBenchOptions {
  laws: LawName[];
  disturbances: Disturbance[];
  drainBytesPerSec: number;
  eventContentBytes: number;
  /** Target = the idle relay's memory + this. */
  headroomBytes: number;
  /** Memory / target held before the disturbance (an allocation the relay keeps; 0: none). */
  level: number;
  /** step: the flood, as a multiple of sustainable; also the writer's quota. */
  overload: number;
  /** spike and degrade: the steady offer, as a share of sustainable. */
  steadyShare: number;
  /** spike: this share of what is left below target at the onset, held this long. */
  spikeShare: number;
  spikeHoldSec: number;
  /** degrade: the drain after the cut, as a share of the drain before. */
  degradeFactor: number;
  /** Seconds before the disturbance, and watched after its onset. */
  preSec: number;
  watchSec: number;
  tickMs: number;
  valkeyClient: ClientKind;
  valkey?: NodeAddress;
}

export const STEP_DEFAULTS: Omit<StepBenchOptions, 'valkeyClient' | 'laws'> = {
  disturbances: [...DISTURBANCES],
  drainBytesPerSec: 2 * MiB,
  eventContentBytes: 32 * 1024,
  headroomBytes: 64 * MiB,
  level: 0.6,
  overload: 3,
  steadyShare: 0.9,
  spikeShare: 0.6,
  spikeHoldSec: 10,
  degradeFactor: 0.25,
  preSec: 10,
  watchSec: 40,
  tickMs: 500,
};

export interface StepSeriesRecord {
  /** Seconds since the writer started. */
  t: number[];
  /** Relay memory (RssAnon) / target. */
  u: number[];
  /** The multiplier each gateway applied (gateway 1, gateway 2). */
  m: number[];
  m2: number[];
  /** Writes accepted so far (2xx), and offered so far. */
  accepted: number[];
  backlogBytes: number[];
  emergency: boolean[];
}

export interface StepArmResult {
  law: LawName;
  disturbance: Disturbance;
  idleBytes: number;
  targetBytes: number;
  /** The allocation that held the relay at `level` before the disturbance. */
  levelBytes: number;
  eventBytes: number;
  sustainablePerSec: number;
  sustainableAfterPerSec: number;
  offeredBeforePerSec: number;
  offeredAfterPerSec: number;
  /** Writes/s accepted over the 5 s before the onset (null: fewer than 2 s of samples). */
  acceptedBeforePerSec: number | null;
  quotaPerSec: number;
  spikeBytes: number | null;
  window: StepWindow;
  /** Marks on the time axis: the onset, and a disturbance's end. */
  marks: { t: number; text: string }[];
  figures: StepFigures;
  /** u and m just before the onset. */
  uBefore: number | null;
  mBefore: number | null;
  emergencyEntries: number;
  /** Answers by kind; notSent: offers past the in-flight bound (the writer's own limit). */
  answers: {
    ok2xx: number;
    limited429: number;
    other: Record<string, number>;
    errors: number;
    notSent: number;
    /** The first few distinct answers other than 2xx and 429 (status and body, or error). */
    examples: string[];
  };
  missedSamples: number;
  /** The machine's 1-minute load average at the arm's start and end (it is shared). */
  loadAverage: { start: number; end: number };
  series: StepSeriesRecord;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function getJson<T>(url: string): Promise<T> {
  const res = await fetch(url, { signal: AbortSignal.timeout(5000) });
  if (!res.ok) throw new Error(`${url} answered ${res.status}`);
  return (await res.json()) as T;
}

async function relayAdmin(relayUrl: string, what: 'spike' | 'drain', body: unknown): Promise<void> {
  const res = await fetch(`${relayUrl}/admin/${what}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${RELAY_ADMIN_TOKEN}` },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(30_000),
  });
  if (!res.ok) throw new Error(`POST /admin/${what} answered ${res.status}: ${await res.text()}`);
}

/** Until both gateways apply multiplier 1 from the feed (a gateway starts at the safe value). */
async function untilTrusted(gateways: BenchGateway[]): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const flows = await Promise.all(gateways.map((g) => readFlow(g, NODE).catch(() => null)));
    if (flows.every((f) => f?.multiplier === 1)) return;
    if (Date.now() > deadline) throw new Error('the gateways did not reach multiplier 1 in 30 s');
    await sleep(250);
  }
}

/** Writes/s accepted over the `sec` seconds before the onset (null: under 2 s of samples). */
export function rateBefore(
  series: Pick<StepSeriesRecord, 't' | 'accepted'>,
  onset: number,
  sec = 5,
): number | null {
  const idx = series.t
    .map((t, i) => [t, i] as const)
    .filter(([t]) => t >= onset - sec && t < onset);
  if (idx.length < 2) return null;
  const [t0, i0] = idx[0]!;
  const [t1, i1] = idx[idx.length - 1]!;
  if (t1 - t0 < 2) return null;
  return (series.accepted[i1]! - series.accepted[i0]!) / (t1 - t0);
}

/**
 * The accepted rate that counts as recovered: 90% of what the node sustains after the
 * disturbance, or of what is offered if less; after a spike (the drain unchanged, the offer
 * the same) also no more than 90% of what was accepted before it, which is what this machine
 * carried through the gateways with the loop at rest.
 */
export function recoverRate(
  disturbance: Disturbance,
  offeredAfterPerSec: number,
  sustainableAfterPerSec: number,
  acceptedBeforePerSec: number | null,
): number {
  const before = disturbance === 'spike' && acceptedBeforePerSec !== null;
  return (
    0.9 *
    Math.min(offeredAfterPerSec, sustainableAfterPerSec, before ? acceptedBeforePerSec : Infinity)
  );
}

/** The figures again from a result's recorded series (after a definition changed). */
export function refigure(r: StepArmResult): StepArmResult {
  const acceptedBeforePerSec = rateBefore(r.series, r.window.onset);
  const window: StepWindow = {
    ...r.window,
    recoverRatePerSec: recoverRate(
      r.disturbance,
      r.offeredAfterPerSec,
      r.sustainableAfterPerSec,
      acceptedBeforePerSec,
    ),
  };
  return { ...r, acceptedBeforePerSec, window, figures: stepFigures(r.series, window) };
}

/** One law against one disturbance, on fresh processes. */
export async function runStepArm(
  law: LawName,
  disturbance: Disturbance,
  o: StepBenchOptions,
  valkey: NodeAddress,
  env: NodeJS.ProcessEnv,
  log: (line: string) => void,
): Promise<StepArmResult> {
  const started: SluiceProcess[] = [];
  const loadStart = os.loadavg()[0]!;
  const configDir = mkdtempSync(path.join(os.tmpdir(), 'sluice-step-gw-'));
  const agent = new http.Agent({ keepAlive: true, maxSockets: MAX_IN_FLIGHT });
  let stop = false;
  const pending = new Set<Promise<void>>();
  try {
    const relay = await startRelay({
      nodeId: NODE,
      drainBytesPerSec: o.drainBytesPerSec,
      env: { ...env, SLUICE_RELAY_ADMIN_TOKEN: RELAY_ADMIN_TOKEN },
    });
    started.push(relay);
    const stats = () =>
      getJson<{ rssAnonBytes: number; backlogBytes: number }>(`${relay.url}/stats`);
    const idle = (await stats()).rssAnonBytes;
    const target = idle + o.headroomBytes;
    // The level: an allocation the relay holds for the whole arm, made before its feed starts,
    // so that the law sees it as where the relay stands, not as a spike to react to.
    const levelBytes = o.level > 0 ? Math.round(Math.max(0, o.level * target - idle)) : 0;
    if (levelBytes > 0)
      await relayAdmin(relay.url, 'spike', { bytes: levelBytes, holdMs: 600_000 });
    const valkeyView = {
      client: o.valkeyClient,
      mode: 'standalone' as const,
      nodes: [`${valkey.host}:${valkey.port}`],
    };
    const feed = await startFeed({
      nodeId: NODE,
      relayUrl: relay.url,
      targetBytes: target,
      tickMs: o.tickMs,
      law,
      valkey: valkeyView,
      env,
    });
    started.push(feed);

    const nw = await initNostrWasm();
    const sk = generateSecretKey();
    const filler = 'x'.repeat(o.eventContentBytes);
    let serial = 0;
    const nextEvent = (): string => {
      const event = {
        kind: 1,
        created_at: Math.floor(Date.now() / 1000),
        tags: [['n', `${law}-${disturbance}-${serial++}`]],
        content: filler,
        pubkey: '',
        id: '',
        sig: '',
      };
      nw.finalizeEvent(event, sk);
      return JSON.stringify(event);
    };
    const eventBytes = Buffer.byteLength(nextEvent());
    const sustainablePerSec = o.drainBytesPerSec / eventBytes;
    const sustainableAfterPerSec =
      disturbance === 'degrade' ? sustainablePerSec * o.degradeFactor : sustainablePerSec;
    const quotaPerSec = Math.round(o.overload * sustainablePerSec);
    const offeredBeforePerSec = (disturbance === 'step' ? 0.5 : o.steadyShare) * sustainablePerSec;
    const offeredAfterPerSec =
      disturbance === 'step' ? o.overload * sustainablePerSec : offeredBeforePerSec;

    const gateways = await startPressureGateways(
      {
        variant: law,
        count: 2,
        nodeId: NODE,
        relayUrl: relay.url,
        valkey: valkeyView,
        quotaPerSec,
        maxBodyBytes: 4 * eventBytes,
        tickMs: o.tickMs,
        // One node: a health check that times out on a busy machine takes the only node out
        // of rotation (503 "no relay node is available" for every write), which measures the
        // machine, not the law. Checks here allow 3 s and three failures.
        extra: { healthCheck: { timeoutMs: 3000, failuresToDown: 3 } },
        configDir,
        env,
      },
      started,
    );
    await untilTrusted(gateways);

    const answers: StepArmResult['answers'] = {
      ok2xx: 0,
      limited429: 0,
      other: {},
      errors: 0,
      notSent: 0,
      examples: [],
    };
    let accepted = 0;
    let inFlight = 0;
    const onset = o.preSec;
    const end = o.preSec + o.watchSec;
    const t0 = Date.now();
    const now = () => (Date.now() - t0) / 1000;
    const offeredAt = (t: number) => (t < onset ? offeredBeforePerSec : offeredAfterPerSec);
    // Open loop: the writer offers at its pace, whatever the answers take.
    const pacing = (async () => {
      let next = Date.now();
      while (!stop) {
        const wait = next - Date.now();
        if (wait > 0) await sleep(wait);
        if (stop) break;
        next += 1000 / offeredAt(now());
        if (inFlight >= MAX_IN_FLIGHT) {
          answers.notSent++;
          continue;
        }
        inFlight++;
        const p = postEvent(`${gateways[serial % 2]!.url}/events`, nextEvent(), WRITER_FROM, {
          agent,
          timeoutMs: 30_000,
        }).then(({ status, body, error }) => {
          inFlight--;
          if (status >= 200 && status < 300) {
            answers.ok2xx++;
            accepted++;
            return;
          }
          if (status === 429) {
            answers.limited429++;
            return;
          }
          if (status === 0) answers.errors++;
          else answers.other[status] = (answers.other[status] ?? 0) + 1;
          const example = `${status} ${(error ?? body).slice(0, 200)}`;
          if (answers.examples.length < 5 && !answers.examples.includes(example)) {
            answers.examples.push(example);
          }
        });
        pending.add(p);
        void p.finally(() => pending.delete(p));
      }
    })();

    const series: StepSeriesRecord = {
      t: [],
      u: [],
      m: [],
      m2: [],
      accepted: [],
      backlogBytes: [],
      emergency: [],
    };
    const marks: { t: number; text: string }[] = [];
    let recoverFrom = onset;
    let spikeBytes: number | null = null;
    let disturbed = false;
    let missedSamples = 0;
    let disturbing: Promise<void> = Promise.resolve();
    while (now() < end) {
      await sleep(SAMPLE_MS - ((Date.now() - t0) % SAMPLE_MS));
      const t = now();
      if (!disturbed && t >= onset) {
        disturbed = true;
        if (disturbance === 'step') {
          marks.push({ t, text: `flood ${o.overload} x sustainable` });
        } else if (disturbance === 'spike') {
          const before = series.u.at(-1) ?? o.level;
          spikeBytes = Math.max(1, Math.round(o.spikeShare * Math.max(0, 1 - before) * target));
          marks.push({ t, text: `spike ${(spikeBytes / MiB).toFixed(0)} MiB` });
          recoverFrom = t + o.spikeHoldSec;
          marks.push({ t: recoverFrom, text: 'spike released' });
          disturbing = relayAdmin(relay.url, 'spike', {
            bytes: spikeBytes,
            holdMs: Math.round(o.spikeHoldSec * 1000),
          });
        } else {
          marks.push({ t, text: `drain cut to ${o.degradeFactor}` });
          disturbing = relayAdmin(relay.url, 'drain', {
            bytesPerSec: Math.round(o.drainBytesPerSec * o.degradeFactor),
          });
        }
        disturbing.catch((err: unknown) => log(`${law} ${disturbance}: ${(err as Error).message}`));
      }
      try {
        const [s, f1, f2] = await Promise.all([
          stats(),
          readFlow(gateways[0]!, NODE),
          readFlow(gateways[1]!, NODE),
        ]);
        series.t.push(Number(now().toFixed(3)));
        series.u.push(Number((s.rssAnonBytes / target).toFixed(4)));
        series.m.push(f1.multiplier);
        series.m2.push(f2.multiplier);
        series.accepted.push(accepted);
        series.backlogBytes.push(s.backlogBytes);
        series.emergency.push(f1.emergency);
      } catch (err) {
        missedSamples++;
        log(`${law} ${disturbance}: a sample was lost (${(err as Error).message})`);
      }
    }
    stop = true;
    await pacing;
    await disturbing.catch(() => undefined);
    await Promise.all([...pending]);

    const iBefore = series.t.filter((t) => t < onset).length - 1;
    const acceptedBeforePerSec = rateBefore(series, onset);
    const window: StepWindow = {
      onset,
      end,
      recoverFrom,
      recoverRatePerSec: recoverRate(
        disturbance,
        offeredAfterPerSec,
        sustainableAfterPerSec,
        acceptedBeforePerSec,
      ),
    };
    const figures = stepFigures(series, window);
    const { entries } = await emergencyTransitions(feed);
    log(
      `${law} / ${disturbance}: peak ${figures.peakOverTarget?.toFixed(3)} x target, ` +
        `settle ${figureText(figures.settleSec)} s, steady u ${figures.steadyU?.toFixed(3)}, ` +
        `90% accepted after ${figureText(figures.recover90Sec)} s, ${entries} emergency entries`,
    );
    return {
      law,
      disturbance,
      idleBytes: idle,
      targetBytes: target,
      levelBytes,
      eventBytes,
      sustainablePerSec,
      sustainableAfterPerSec,
      offeredBeforePerSec,
      offeredAfterPerSec,
      acceptedBeforePerSec,
      quotaPerSec,
      spikeBytes,
      window,
      marks: marks.map((k) => ({ t: Number(k.t.toFixed(2)), text: k.text })),
      figures,
      uBefore: iBefore >= 0 ? series.u[iBefore]! : null,
      mBefore: iBefore >= 0 ? series.m[iBefore]! : null,
      emergencyEntries: entries,
      answers,
      missedSamples,
      loadAverage: { start: loadStart, end: os.loadavg()[0]! },
      series,
    };
  } finally {
    stop = true;
    await Promise.allSettled([...pending]);
    agent.destroy();
    await Promise.allSettled(started.reverse().map((p) => p.stop()));
    rmSync(configDir, { recursive: true, force: true });
  }
}

export async function runStepBench(
  o: StepBenchOptions,
  log: (line: string) => void,
): Promise<StepArmResult[]> {
  return withBenchValkey('bench-step', o.valkey, log, async (valkey, env) => {
    const results: StepArmResult[] = [];
    for (const law of o.laws) {
      for (const d of o.disturbances) results.push(await runStepArm(law, d, o, valkey, env, log));
    }
    return results;
  });
}

const DISTURBANCE_TEXT = (r: StepArmResult, o: StepBenchOptions): string =>
  r.disturbance === 'step'
    ? `step: flood ${o.overload} x sustainable`
    : r.disturbance === 'spike'
      ? `spike: ${((r.spikeBytes ?? 0) / MiB).toFixed(0)} MiB held ${o.spikeHoldSec} s`
      : `degrade: drain cut to ${o.degradeFactor}`;

/** The table of docs/BENCHMARKS.md: one row per law and disturbance. */
export function formatStepTable(results: StepArmResult[], o: StepBenchOptions): string {
  const lines = [
    '| law | disturbance | u before | peak memory / target (s after onset) | settling time s (±0.05 of steady u) | steady u (m) | steady-state error (u - 1) | 90% accepted after s | emergency entries | 2xx / 429 / other (offers not sent) | load avg |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |',
  ];
  for (const r of results) {
    const f = r.figures;
    const other = Object.values(r.answers.other).reduce((a, b) => a + b, 0) + r.answers.errors;
    lines.push(
      `| ${r.law} | ${DISTURBANCE_TEXT(r, o)} | ${r.uBefore?.toFixed(2) ?? 'n/a'} | ` +
        `${f.peakOverTarget?.toFixed(3) ?? 'n/a'} (${f.peakAtSec?.toFixed(1) ?? 'n/a'}) | ` +
        `${figureText(f.settleSec)} | ` +
        `${f.steadyU?.toFixed(3) ?? 'n/a'} (${f.steadyM?.toFixed(2) ?? 'n/a'}) | ` +
        `${figureText(f.steadyStateError, 3, 'n/a')} | ${figureText(f.recover90Sec)} | ` +
        `${r.emergencyEntries} | ${r.answers.ok2xx} / ${r.answers.limited429} / ${other} ` +
        `(${r.answers.notSent}) | ${r.loadAverage.start.toFixed(1)} |`,
    );
  }
  return lines.join('\n');
}
