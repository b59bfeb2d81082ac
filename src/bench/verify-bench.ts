/**
 * `sluice bench verify`: Nostr event verifications per CPU-second (one core), side by side in
 * one process: nostr-tools' pure-JS verifier, the gateway's verifier (nostr-wasm behind its
 * input checks), nostr-wasm's own `verifyEvent`, and each installed candidate schnorr verifier
 * behind the gateway's checks (verify-candidates.ts), on valid events and on events whose
 * signature was tampered with (the dearest invalid case: id fine, the whole schnorr check runs).
 * Every verifier's verdicts are first compared with the gateway's on valid and tampered events;
 * one that disagrees is not timed.
 *
 * Then the gateway's verifier inline against the same on a pool of worker threads
 * (verify-pool.ts), as a gateway running as one process could use: whole-process CPU per
 * verification, the main thread's share of it, and the latency the hop to a thread adds.
 *
 * Every verification gets an event freshly parsed from JSON: nostr-tools caches a "verified"
 * symbol on event objects, and events it signed itself carry it already.
 */
import { readFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import {
  finalizeEvent,
  generateSecretKey,
  getEventHash,
  getPublicKey,
  verifyEvent,
} from 'nostr-tools/pure';
import type { Event } from 'nostr-tools/pure';
import { initNostrWasm } from 'nostr-wasm';
import { eventIdMatches, initSignatureVerifier, verifySignature } from '../nostr/verify.js';
import { seededRandom } from '../util/random.js';
import { median, minMax, shuffled } from './stats.js';
import {
  SCHNORR_CANDIDATES,
  installCommand,
  installedVersion,
  loadCandidate,
} from './verify-candidates.js';
import type { Schnorr, SchnorrCandidate } from './verify-candidates.js';
import { VerifyPool } from './verify-pool.js';

export interface VerifyBenchOptions {
  /** Events per set (valid, invalid) verified by each verifier in each round. */
  events: number;
  rounds: number;
  /** Characters of content per event. */
  contentChars: number;
  seed: number;
  /** Worker-thread pools to measure against inline verification (threads each); [] for none. */
  poolThreads: number[];
  /** Events verified per arm and round in the worker-thread comparison. */
  poolEvents: number;
  /** Events per message to a worker at most. */
  poolBatch: number;
  /** Events verified one at a time per arm and round, for the added latency. */
  latencyEvents: number;
}

export const VERIFY_SETS = ['valid', 'invalid'] as const;
export type VerifySet = (typeof VERIFY_SETS)[number];

type Range = [number, number];

export interface VerifyRow {
  verifier: string;
  set: VerifySet;
  /** Median over the rounds of verifications per second of wall time (one thread). */
  perSecond: number;
  /** Median over the rounds of verifications per CPU-second: what one core sustains. */
  perCpuSecond: number;
  roundsPerCpuSecond: Range;
  cpuUsPerVerification: number;
  /** perCpuSecond over the gateway's on the same set. */
  ratioToGateway: number;
}

export interface CandidateStatus {
  name: string;
  wanted: string;
  installed?: string;
  eligible: boolean;
  engine: string;
  install: string;
  /** measured, or why not. */
  status: string;
}

export interface PoolRow {
  arm: string;
  /** Medians over the rounds, with their ranges. */
  perSecond: number;
  perCpuSecond: number;
  roundsPerCpuSecond: Range;
  cpuUsPerVerification: number;
  /** CPU of the main thread (the event loop) per verification; undefined off Linux. */
  mainThreadUsPerVerification?: number;
  roundsMainThreadUs?: Range;
  /** One event in flight: time from the call to its verdict, microseconds. */
  latencyP50Us: number;
  latencyP99Us: number;
  /** latencyP50Us minus inline's, median over the rounds. */
  addedLatencyP50Us: number;
  roundsAddedLatencyUs: Range;
}

export interface VerifyBenchResult {
  options: VerifyBenchOptions;
  rows: VerifyRow[];
  /** perCpuSecond of the gateway's verifier over nostr-tools', per set. */
  ratio: Record<VerifySet, number>;
  candidates: CandidateStatus[];
  /** The eligible candidate with the best valid-set ratio to the gateway, if any was measured. */
  best?: { name: string; ratio: Record<VerifySet, number>; winsByMoreThan2x: boolean };
  pool: PoolRow[];
  /** One-minute load average when each round started (the machine is shared). */
  loadPerRound: number[];
  poolLoadPerRound: number[];
}

type Verify = (event: Event) => boolean;

const GATEWAY = 'sluice (nostr-wasm)';
const BASELINE = 'nostr-tools';

/** The events of both timed sets, as the JSON text a client would send. */
function makeEvents(options: VerifyBenchOptions, count: number): Record<VerifySet, string[]> {
  const random = seededRandom(options.seed);
  const keys = Array.from({ length: 8 }, () => generateSecretKey());
  const alphabet = 'abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,"\\✓';
  const valid: string[] = [];
  const invalid: string[] = [];
  for (let i = 0; i < count; i++) {
    let content = '';
    for (let c = 0; c < options.contentChars; c++) {
      content += alphabet[Math.floor(random() * alphabet.length)];
    }
    const event = finalizeEvent(
      {
        kind: 1,
        created_at: 1_700_000_000 + i,
        tags: i % 2 ? [['t', `topic${i % 7}`]] : [['p', '0'.repeat(64)]],
        content,
      },
      keys[i % keys.length]!,
    );
    valid.push(JSON.stringify(event));
    // Flip one nibble of s: still 128 hex characters, so the whole schnorr check runs.
    invalid.push(JSON.stringify({ ...event, sig: flipLast(event.sig) }));
  }
  return { valid, invalid };
}

function flipLast(hex: string): string {
  return hex.slice(0, -1) + (hex.at(-1) === '0' ? '1' : '0');
}

const FIELD_PRIME = 'fffffffffffffffffffffffffffffffffffffffffffffffffffffffefffffc2f';
const GROUP_ORDER = 'fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141';

/** The smallest x with no point on secp256k1 (x^3 + 7 not a square mod p), as 64 hex digits. */
function offCurveX(): string {
  const p = BigInt(`0x${FIELD_PRIME}`);
  const pow = (base: bigint, exp: bigint) => {
    let result = 1n;
    for (base %= p; exp > 0n; exp >>= 1n, base = (base * base) % p) {
      if (exp & 1n) result = (result * base) % p;
    }
    return result;
  };
  for (let x = 1n; ; x++) {
    if (pow(x ** 3n + 7n, (p - 1n) / 2n) === p - 1n) return x.toString(16).padStart(64, '0');
  }
}

/**
 * Valid events and events tampered so that each part of a verifier is exercised: a wrong id
 * (the hash check), and, with the id recomputed so that the schnorr check itself must answer,
 * a signature over other content, another key, a key off the curve, r and s out of range.
 */
export function correctnessCases(
  texts: string[],
): { name: string; event: Event; valid: boolean }[] {
  const other = getPublicKey(generateSecretKey());
  const offCurve = offCurveX();
  const rehash = (e: Event): Event => ({ ...e, id: getEventHash(e) });
  const tampers: Record<string, (e: Event) => Event> = {
    'sig s flipped': (e) => ({ ...e, sig: flipLast(e.sig) }),
    'sig r flipped': (e) => ({ ...e, sig: flipLast(e.sig.slice(0, 64)) + e.sig.slice(64) }),
    'id flipped': (e) => ({ ...e, id: flipLast(e.id) }),
    'content changed, id recomputed': (e) => rehash({ ...e, content: `${e.content}!` }),
    'another pubkey, id recomputed': (e) => rehash({ ...e, pubkey: other }),
    'pubkey off the curve, id recomputed': (e) => rehash({ ...e, pubkey: offCurve }),
    'sig r = p': (e) => ({ ...e, sig: FIELD_PRIME + e.sig.slice(64) }),
    'sig s = n': (e) => ({ ...e, sig: e.sig.slice(0, 64) + GROUP_ORDER }),
  };
  return texts.flatMap((text) => {
    const event = JSON.parse(text) as Event;
    return [
      { name: 'valid', event, valid: true },
      ...Object.entries(tampers).map(([name, tamper]) => ({
        name,
        event: tamper(event),
        valid: false,
      })),
    ];
  });
}

/** The cases on which a verifier's verdict is wrong (each event a fresh copy), or a throw. */
function disagreements(verify: Verify, cases: ReturnType<typeof correctnessCases>): string[] {
  const wrong = new Set<string>();
  for (const { name, event, valid } of cases) {
    let verdict: boolean | string;
    try {
      verdict = verify(JSON.parse(JSON.stringify(event)) as Event);
    } catch (err) {
      verdict = `threw ${(err as Error).message}`;
    }
    if (verdict !== valid) wrong.add(`${name}: ${String(verdict)}`);
  }
  return [...wrong];
}

/** A candidate schnorr behind the gateway's input and id checks; a throw is a refusal. */
function behindGatewayChecks(schnorr: Schnorr): Verify {
  return (event) => {
    if (!eventIdMatches(event)) return false;
    try {
      return schnorr(
        Buffer.from(event.id, 'hex'),
        Buffer.from(event.pubkey, 'hex'),
        Buffer.from(event.sig, 'hex'),
      );
    } catch {
      return false;
    }
  };
}

interface Sample {
  verifications: number;
  wallNs: number;
  cpuUs: number;
}

/** Verify every event once, each a fresh parse; check the verdicts; time only the verifying. */
function measure(name: string, verify: Verify, texts: string[], expected: boolean): Sample {
  const events = texts.map((t) => JSON.parse(t) as Event);
  const cpuStart = process.cpuUsage();
  const wallStart = process.hrtime.bigint();
  let accepted = 0;
  for (const event of events) if (verify(event)) accepted++;
  const wallNs = Number(process.hrtime.bigint() - wallStart);
  const cpu = process.cpuUsage(cpuStart);
  const want = expected ? events.length : 0;
  if (accepted !== want) {
    throw new Error(`${name} accepted ${accepted} of ${events.length} events, expected ${want}`);
  }
  return { verifications: events.length, wallNs, cpuUs: cpu.user + cpu.system };
}

async function verifiersToMeasure(
  cases: ReturnType<typeof correctnessCases>,
  schnorrCandidates: SchnorrCandidate[],
  progress: (line: string) => void,
): Promise<{ verifiers: [string, Verify][]; candidates: CandidateStatus[] }> {
  const wasm = await initNostrWasm();
  const verifiers: [string, Verify][] = [
    [BASELINE, verifyEvent],
    [GATEWAY, verifySignature],
    [
      'nostr-wasm verifyEvent',
      (event) => {
        try {
          wasm.verifyEvent(event);
          return true;
        } catch {
          return false;
        }
      },
    ],
  ];
  for (const [name, verify] of verifiers) {
    const wrong = disagreements(verify, cases);
    if (wrong.length) throw new Error(`${name} gives wrong verdicts: ${wrong.join('; ')}`);
  }
  const candidates: CandidateStatus[] = [];
  for (const candidate of schnorrCandidates) {
    const installed = installedVersion(candidate);
    const status: CandidateStatus = {
      name: candidate.name,
      wanted: candidate.version,
      ...(installed ? { installed } : {}),
      eligible: candidate.eligible,
      engine: candidate.engine,
      install: candidate.install,
      status: 'measured',
    };
    candidates.push(status);
    if (!installed) {
      status.status = 'not installed';
      continue;
    }
    let verify: Verify;
    try {
      verify = behindGatewayChecks(await loadCandidate(candidate));
    } catch (err) {
      status.status = `failed to load: ${(err as Error).message}`;
      continue;
    }
    const wrong = disagreements(verify, cases);
    if (wrong.length) {
      status.status = `not timed, wrong verdicts: ${wrong.join('; ')}`;
      continue;
    }
    verifiers.push([label(status), verify]);
  }
  const missing = candidates.filter((c) => c.status === 'not installed');
  if (missing.length) {
    progress(`not installed: ${missing.map((c) => c.name).join(', ')} (${installCommand()})`);
  }
  return { verifiers, candidates };
}

function label(candidate: CandidateStatus): string {
  return `${candidate.name} ${candidate.installed ?? candidate.wanted}`;
}

export async function runVerifyBench(
  options: VerifyBenchOptions,
  progress: (line: string) => void = () => undefined,
  schnorrCandidates: SchnorrCandidate[] = SCHNORR_CANDIDATES,
): Promise<VerifyBenchResult> {
  progress(`signing events of ${options.contentChars} characters...`);
  const sets = makeEvents(options, Math.max(options.events, options.poolEvents));
  const timed = {
    valid: sets.valid.slice(0, options.events),
    invalid: sets.invalid.slice(0, options.events),
  };
  await initSignatureVerifier();
  const cases = correctnessCases(sets.valid.slice(0, 8));
  const { verifiers, candidates } = await verifiersToMeasure(cases, schnorrCandidates, progress);
  const arms = verifiers.flatMap(([name, verify]) =>
    VERIFY_SETS.map((set) => ({ name, verify, set })),
  );
  // Warm-up, unrecorded: lets the JIT settle on both sides.
  const warm = Math.min(100, options.events);
  for (const { name, verify, set } of arms) {
    measure(name, verify, timed[set].slice(0, warm), set === 'valid');
  }
  const loadPerRound: number[] = [];
  const samples = new Map<string, Sample[]>();
  for (let round = 0; round < options.rounds; round++) {
    loadPerRound.push(loadavg()[0]!);
    progress(`round ${round + 1}/${options.rounds} (load ${loadPerRound.at(-1)!.toFixed(2)})`);
    for (const { name, verify, set } of shuffled(arms, options.seed + round)) {
      const sample = measure(name, verify, timed[set], set === 'valid');
      const key = `${name}\u0000${set}`;
      samples.set(key, [...(samples.get(key) ?? []), sample]);
    }
  }
  const rows = arms.map(({ name, set }) =>
    summarise(name, set, samples.get(`${name}\u0000${set}`)!),
  );
  const perCpu = (name: string, set: VerifySet) =>
    rows.find((r) => r.verifier === name && r.set === set)!.perCpuSecond;
  for (const row of rows) row.ratioToGateway = row.perCpuSecond / perCpu(GATEWAY, row.set);
  const ratio = {
    valid: perCpu(GATEWAY, 'valid') / perCpu(BASELINE, 'valid'),
    invalid: perCpu(GATEWAY, 'invalid') / perCpu(BASELINE, 'invalid'),
  };
  const measured = candidates.filter((c) => c.eligible && c.status === 'measured');
  const ratios = measured.map((c) => ({
    name: label(c),
    ratio: {
      valid: perCpu(label(c), 'valid') / perCpu(GATEWAY, 'valid'),
      invalid: perCpu(label(c), 'invalid') / perCpu(GATEWAY, 'invalid'),
    },
  }));
  const top = ratios.sort((a, b) => b.ratio.valid - a.ratio.valid)[0];
  const best = top && {
    ...top,
    winsByMoreThan2x: top.ratio.valid > 2 && top.ratio.invalid > 2,
  };
  const poolLoadPerRound: number[] = [];
  const pool = options.poolThreads.length
    ? await runPoolBench(
        options,
        sets.valid.slice(0, options.poolEvents),
        poolLoadPerRound,
        progress,
      )
    : [];
  return {
    options,
    rows,
    ratio,
    candidates,
    ...(best ? { best } : {}),
    pool,
    loadPerRound,
    poolLoadPerRound,
  };
}

function summarise(verifier: string, set: VerifySet, samples: Sample[]): VerifyRow {
  const perCpu = samples.map((s) => s.verifications / (s.cpuUs / 1e6));
  return {
    verifier,
    set,
    perSecond: median(samples.map((s) => s.verifications / (s.wallNs / 1e9))),
    perCpuSecond: median(perCpu),
    roundsPerCpuSecond: minMax(perCpu),
    cpuUsPerVerification: median(samples.map((s) => s.cpuUs / s.verifications)),
    ratioToGateway: NaN,
  };
}

/** CPU microseconds of the main thread so far, from Linux's schedstat (ns); else undefined. */
function mainThreadCpuUs(): number | undefined {
  try {
    const stat = readFileSync(`/proc/self/task/${process.pid}/schedstat`, 'utf8');
    return Number(stat.split(' ')[0]) / 1e3;
  } catch {
    return undefined;
  }
}

interface PoolSample {
  wallNs: number;
  cpuUs: number;
  mainUs?: number;
  latencyUs: number[];
}

/** Inline verdicts come at once; a pool's when its threads answer. */
interface Arm {
  name: string;
  verifyAll(events: Event[]): boolean[] | Promise<boolean[]>;
  verify(event: Event): boolean | Promise<boolean>;
}

/** The whole set at once (throughput), then one event at a time (latency). */
async function measureArm(arm: Arm, texts: string[], latencyEvents: number): Promise<PoolSample> {
  const events = texts.map((t) => JSON.parse(t) as Event);
  const mainStart = mainThreadCpuUs();
  const cpuStart = process.cpuUsage();
  const wallStart = process.hrtime.bigint();
  const verdicts = await arm.verifyAll(events);
  const wallNs = Number(process.hrtime.bigint() - wallStart);
  const cpu = process.cpuUsage(cpuStart);
  const mainEnd = mainThreadCpuUs();
  if (verdicts.some((v) => !v)) throw new Error(`${arm.name} refused a valid event`);
  const latencyUs: number[] = [];
  for (const text of texts.slice(0, latencyEvents)) {
    const event = JSON.parse(text) as Event;
    const start = process.hrtime.bigint();
    if (!(await arm.verify(event))) throw new Error(`${arm.name} refused a valid event`);
    latencyUs.push(Number(process.hrtime.bigint() - start) / 1e3);
  }
  return {
    wallNs,
    cpuUs: cpu.user + cpu.system,
    ...(mainStart !== undefined && mainEnd !== undefined ? { mainUs: mainEnd - mainStart } : {}),
    latencyUs,
  };
}

async function runPoolBench(
  options: VerifyBenchOptions,
  texts: string[],
  loadPerRound: number[],
  progress: (line: string) => void,
): Promise<PoolRow[]> {
  const pools = await Promise.all(
    options.poolThreads.map((threads) =>
      VerifyPool.start({ threads, maxBatch: options.poolBatch }),
    ),
  );
  try {
    const arms: Arm[] = [
      {
        name: 'inline (the gateway today)',
        verifyAll: (events) => events.map((e) => verifySignature(e)),
        verify: verifySignature,
      },
      ...pools.map((pool, i) => ({
        name: `worker pool, ${options.poolThreads[i]} thread(s)`,
        verifyAll: (events: Event[]) => Promise.all(events.map((e) => pool.verify(e))),
        verify: (event: Event) => pool.verify(event),
      })),
    ];
    for (const arm of arms) await measureArm(arm, texts.slice(0, 100), 20);
    const samples = new Map<string, PoolSample[]>(arms.map((a) => [a.name, []]));
    for (let round = 0; round < options.rounds; round++) {
      loadPerRound.push(loadavg()[0]!);
      progress(
        `worker threads, round ${round + 1}/${options.rounds} (load ${loadPerRound.at(-1)!.toFixed(2)})`,
      );
      for (const arm of shuffled(arms, options.seed + 1000 + round)) {
        samples.get(arm.name)!.push(await measureArm(arm, texts, options.latencyEvents));
      }
    }
    const inline = samples.get(arms[0]!.name)!;
    return arms.map((arm) => summarisePool(arm.name, samples.get(arm.name)!, inline, texts.length));
  } finally {
    await Promise.all(pools.map((p) => p.close()));
  }
}

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!;
}

function summarisePool(
  arm: string,
  samples: PoolSample[],
  inline: PoolSample[],
  events: number,
): PoolRow {
  const perCpu = samples.map((s) => events / (s.cpuUs / 1e6));
  const mainUs = samples.flatMap((s) => (s.mainUs === undefined ? [] : [s.mainUs / events]));
  const added = samples.map(
    (s, i) => percentile(s.latencyUs, 0.5) - percentile(inline[i]!.latencyUs, 0.5),
  );
  return {
    arm,
    perSecond: median(samples.map((s) => events / (s.wallNs / 1e9))),
    perCpuSecond: median(perCpu),
    roundsPerCpuSecond: minMax(perCpu),
    cpuUsPerVerification: median(samples.map((s) => s.cpuUs / events)),
    ...(mainUs.length
      ? { mainThreadUsPerVerification: median(mainUs), roundsMainThreadUs: minMax(mainUs) }
      : {}),
    latencyP50Us: median(samples.map((s) => percentile(s.latencyUs, 0.5))),
    latencyP99Us: median(samples.map((s) => percentile(s.latencyUs, 0.99))),
    addedLatencyP50Us: median(added),
    roundsAddedLatencyUs: minMax(added),
  };
}

function table(header: string[], lines: string[][], textColumns: number): string {
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i]!.length)));
  return [header, ...lines]
    .map((cells) =>
      cells.map((c, i) => (i < textColumns ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))),
    )
    .map((cells) => cells.join('  '))
    .join('\n');
}

const range = ([lo, hi]: Range, digits = 0) => `${lo.toFixed(digits)}-${hi.toFixed(digits)}`;

export function formatVerifyBench(result: VerifyBenchResult): string {
  const { options, rows, ratio, candidates, best, pool, loadPerRound, poolLoadPerRound } = result;
  const out = [
    `${options.events} events per set x ${options.rounds} rounds, ${options.contentChars}-character content, ` +
      `one thread (${cpus()[0]?.model ?? 'unknown CPU'}, node ${process.version}); ` +
      `load average per round ${loadPerRound.map((l) => l.toFixed(1)).join(' ')}`,
    table(
      [
        'verifier',
        'set',
        'verif/s',
        'verif/CPU-s',
        'CPU us/verif',
        'rounds (verif/CPU-s)',
        'x gateway',
      ],
      rows.map((r) => [
        r.verifier,
        r.set,
        r.perSecond.toFixed(0),
        r.perCpuSecond.toFixed(0),
        r.cpuUsPerVerification.toFixed(1),
        range(r.roundsPerCpuSecond),
        r.ratioToGateway.toFixed(2),
      ]),
      2,
    ),
    `${GATEWAY} / ${BASELINE}, verifications per CPU-second: ` +
      `valid ${ratio.valid.toFixed(2)}x, invalid ${ratio.invalid.toFixed(2)}x`,
    '',
    'candidates (each behind the gateway input and id checks):',
    ...candidates.map(
      (c) =>
        `  ${c.name}@${c.installed ?? c.wanted}: ${c.engine}; ${c.install}; ${c.status}` +
        (c.eligible ? '' : ' (for reference only)'),
    ),
    best
      ? `best eligible: ${best.name}, ${best.ratio.valid.toFixed(2)}x (valid) and ` +
        `${best.ratio.invalid.toFixed(2)}x (invalid) the gateway's verifications per CPU-second: ` +
        (best.winsByMoreThan2x ? 'wins by more than 2x' : 'not more than 2x, keep nostr-wasm')
      : 'no eligible candidate measured: keep nostr-wasm',
  ];
  if (pool.length) {
    out.push(
      '',
      `worker threads: ${options.poolEvents} valid events at once per arm and round (batches of ` +
        `up to ${options.poolBatch}), then ${options.latencyEvents} one at a time; CPU of the whole ` +
        `process; load average per round ${poolLoadPerRound.map((l) => l.toFixed(1)).join(' ')}`,
      table(
        [
          'arm',
          'verif/s',
          'verif/CPU-s',
          'rounds',
          'CPU us/verif',
          'main thread CPU us/verif',
          'p50 us',
          'p99 us',
          'added p50 us (rounds)',
        ],
        pool.map((r) => [
          r.arm,
          r.perSecond.toFixed(0),
          r.perCpuSecond.toFixed(0),
          range(r.roundsPerCpuSecond),
          r.cpuUsPerVerification.toFixed(1),
          r.mainThreadUsPerVerification === undefined
            ? 'n/a'
            : `${r.mainThreadUsPerVerification.toFixed(1)} (${range(r.roundsMainThreadUs!, 1)})`,
          r.latencyP50Us.toFixed(0),
          r.latencyP99Us.toFixed(0),
          `${r.addedLatencyP50Us.toFixed(0)} (${range(r.roundsAddedLatencyUs)})`,
        ]),
        1,
      ),
    );
  }
  return out.join('\n');
}
