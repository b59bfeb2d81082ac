import type { Command } from 'commander';
import type { VerifyBenchOptions } from '../bench/verify-bench.js';
import { positiveInt } from './flags.js';

type VerifyFlags = VerifyBenchOptions & { out?: string };

/** "1,2" -> [1, 2]; "" or "none" -> [] (no worker-thread comparison). */
function threadList(value: string): number[] {
  if (value === '' || value === 'none') return [];
  return value.split(',').map((part) => positiveInt(part.trim()));
}

/** The bench's sizes, each a positive whole number: flag, help, default. */
const SIZES: [flags: string, help: string, fallback: number][] = [
  ['--events <n>', 'events per set, verified by each verifier each round', 400],
  ['--rounds <n>', 'rounds; verifiers and sets run in a shuffled order each', 3],
  ['--content-chars <n>', 'characters of content per event', 280],
  ['--seed <n>', 'seed of the content and the order', 1],
];
/** The same, for the comparison of inline verification with worker-thread pools. */
const POOL_SIZES: typeof SIZES = [
  [
    '--pool-events <n>',
    'events verified at once per arm and round in the worker-thread comparison',
    2000,
  ],
  ['--pool-batch <n>', 'events per message to a worker at most', 64],
  [
    '--latency-events <n>',
    'events verified one at a time per arm and round, for the added latency',
    200,
  ],
];

/**
 * `sluice bench verify`: Nostr signature verifications per core, nostr-tools, the gateway's and
 * each installed candidate verifier; then the gateway's inline against worker threads.
 */
export function registerBenchVerify(bench: Command): void {
  const command = bench
    .command('verify')
    .description(
      "Nostr event verifications per CPU-second, nostr-tools' verifyEvent beside the gateway's " +
        'verifier (nostr-wasm), on valid events and on events with a tampered signature',
    );
  for (const [flags, help, fallback] of SIZES) command.option(flags, help, positiveInt, fallback);
  command.option(
    '--pool-threads <list>',
    "worker-thread pools to compare with inline verification, threads each ('none': skip)",
    threadList,
    [1, 2],
  );
  for (const [flags, help, fallback] of POOL_SIZES) {
    command.option(flags, help, positiveInt, fallback);
  }
  command
    .option('--out <dir>', 'also write <dir>/verify.json')
    .action(async ({ out, ...options }: VerifyFlags) => {
      const { runVerifyBench, formatVerifyBench } = await import('../bench/verify-bench.js');
      const result = await runVerifyBench(options, (line) => console.error(line));
      console.log(formatVerifyBench(result));
      if (out) {
        const { writeResult } = await import('../bench/results.js');
        const file = writeResult(out, 'verify.json', 'bench-verify', { ...result });
        console.log(`\nresults: ${file}`);
      }
    });
}
