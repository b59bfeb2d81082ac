/**
 * `sluice bench verify`: Nostr event verifications per CPU-second (one core) for nostr-tools'
 * pure-JS verifier, the gateway's verifier (nostr-wasm behind its input checks) and nostr-wasm's
 * own `verifyEvent`, side by side in one process, on valid events and on events whose signature
 * was tampered with (the dearest invalid case: id fine, the whole schnorr check runs).
 *
 * Every verification gets an event freshly parsed from JSON: nostr-tools caches a "verified"
 * symbol on event objects, and events it signed itself carry it already.
 */
import { cpus } from 'node:os';
import { finalizeEvent, generateSecretKey, verifyEvent } from 'nostr-tools/pure';
import type { Event } from 'nostr-tools/pure';
import { initNostrWasm } from 'nostr-wasm';
import { initSignatureVerifier, verifySignature } from '../nostr/verify.js';
import { seededRandom } from '../util/random.js';
import { minMax, shuffled } from './stats.js';

export interface VerifyBenchOptions {
  /** Events per set (valid, invalid) verified by each verifier in each round. */
  events: number;
  rounds: number;
  /** Characters of content per event. */
  contentChars: number;
  seed: number;
}

export const VERIFY_SETS = ['valid', 'invalid'] as const;
export type VerifySet = (typeof VERIFY_SETS)[number];

export interface VerifyRow {
  verifier: string;
  set: VerifySet;
  verifications: number;
  wallMs: number;
  cpuMs: number;
  /** Verifications per second of wall time (one thread). */
  perSecond: number;
  /** Verifications per CPU-second: what one core sustains. */
  perCpuSecond: number;
  cpuUsPerVerification: number;
  /** Spread of perCpuSecond over the rounds. */
  roundsPerCpuSecond: [number, number];
}

export interface VerifyBenchResult {
  options: VerifyBenchOptions;
  rows: VerifyRow[];
  /** perCpuSecond of the gateway's verifier over nostr-tools', per set. */
  ratio: Record<VerifySet, number>;
}

type Verify = (event: Event) => boolean;

const GATEWAY = 'sluice (nostr-wasm)';
const BASELINE = 'nostr-tools';

/** The events of both sets, as the JSON text a client would send. */
function makeEvents(options: VerifyBenchOptions): Record<VerifySet, string[]> {
  const random = seededRandom(options.seed);
  const keys = Array.from({ length: 8 }, () => generateSecretKey());
  const alphabet = 'abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,"\\✓';
  const valid: string[] = [];
  const invalid: string[] = [];
  for (let i = 0; i < options.events; i++) {
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
    const last = event.sig.at(-1) === '0' ? '1' : '0';
    invalid.push(JSON.stringify({ ...event, sig: event.sig.slice(0, -1) + last }));
  }
  return { valid, invalid };
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

export async function runVerifyBench(
  options: VerifyBenchOptions,
  progress: (line: string) => void = () => undefined,
): Promise<VerifyBenchResult> {
  progress(`signing ${options.events} events of ${options.contentChars} characters...`);
  const sets = makeEvents(options);
  await initSignatureVerifier();
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
  const arms = verifiers.flatMap(([name, verify]) =>
    VERIFY_SETS.map((set) => ({ name, verify, set })),
  );
  // Warm-up, unrecorded: lets the JIT settle on both sides.
  const warm = Math.min(100, options.events);
  for (const { name, verify, set } of arms) {
    measure(name, verify, sets[set].slice(0, warm), set === 'valid');
  }
  const samples = new Map<string, Sample[]>();
  for (let round = 0; round < options.rounds; round++) {
    progress(`round ${round + 1}/${options.rounds}`);
    for (const { name, verify, set } of shuffled(arms, options.seed + round)) {
      const sample = measure(name, verify, sets[set], set === 'valid');
      const key = `${name}\u0000${set}`;
      samples.set(key, [...(samples.get(key) ?? []), sample]);
    }
  }
  const rows = arms.map(({ name, set }) =>
    summarise(name, set, samples.get(`${name}\u0000${set}`)!),
  );
  const perCpu = (name: string, set: VerifySet) =>
    rows.find((r) => r.verifier === name && r.set === set)!.perCpuSecond;
  const ratio = {
    valid: perCpu(GATEWAY, 'valid') / perCpu(BASELINE, 'valid'),
    invalid: perCpu(GATEWAY, 'invalid') / perCpu(BASELINE, 'invalid'),
  };
  return { options, rows, ratio };
}

function summarise(verifier: string, set: VerifySet, samples: Sample[]): VerifyRow {
  const verifications = samples.reduce((a, s) => a + s.verifications, 0);
  const wallMs = samples.reduce((a, s) => a + s.wallNs, 0) / 1e6;
  const cpuMs = samples.reduce((a, s) => a + s.cpuUs, 0) / 1e3;
  return {
    verifier,
    set,
    verifications,
    wallMs,
    cpuMs,
    perSecond: verifications / (wallMs / 1e3),
    perCpuSecond: verifications / (cpuMs / 1e3),
    cpuUsPerVerification: (cpuMs * 1e3) / verifications,
    roundsPerCpuSecond: minMax(samples.map((s) => s.verifications / (s.cpuUs / 1e6))),
  };
}

export function formatVerifyBench(result: VerifyBenchResult): string {
  const { options, rows, ratio } = result;
  const header = [
    'verifier',
    'set',
    'verif/s',
    'verif/CPU-s',
    'CPU us/verif',
    'rounds (verif/CPU-s)',
  ];
  const lines = rows.map((r) => [
    r.verifier,
    r.set,
    r.perSecond.toFixed(0),
    r.perCpuSecond.toFixed(0),
    r.cpuUsPerVerification.toFixed(1),
    `${r.roundsPerCpuSecond[0].toFixed(0)}-${r.roundsPerCpuSecond[1].toFixed(0)}`,
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i]!.length)));
  const table = [header, ...lines]
    .map((cells) => cells.map((c, i) => (i < 2 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))))
    .map((cells) => cells.join('  '))
    .join('\n');
  return [
    `${options.events} events per set x ${options.rounds} rounds, ${options.contentChars}-character content, ` +
      `one thread (${cpus()[0]?.model ?? 'unknown CPU'}, node ${process.version})`,
    table,
    `${GATEWAY} / ${BASELINE}, verifications per CPU-second: ` +
      `valid ${ratio.valid.toFixed(2)}x, invalid ${ratio.invalid.toFixed(2)}x`,
  ].join('\n');
}
