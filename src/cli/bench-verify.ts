import type { Command } from 'commander';
import type { VerifyBenchOptions } from '../bench/verify-bench.js';
import { positiveInt } from './flags.js';

type VerifyFlags = VerifyBenchOptions & { out?: string };

/** "1,2" -> [1, 2]; "" or "none" -> [] (no worker-thread comparison). */
function threadList(value: string): number[] {
  if (value === '' || value === 'none') return [];
  return value.split(',').map((part) => positiveInt(part.trim()));
}

/**
 * `sluice bench verify`: Nostr signature verifications per core, nostr-tools, the gateway's and
 * each installed candidate verifier; then the gateway's inline against worker threads.
 */
export function registerBenchVerify(bench: Command): void {
  bench
    .command('verify')
    .description(
      "Nostr event verifications per CPU-second, nostr-tools' verifyEvent beside the gateway's " +
        'verifier (nostr-wasm), on valid events and on events with a tampered signature',
    )
    .option(
      '--events <n>',
      'events per set, verified by each verifier each round',
      positiveInt,
      400,
    )
    .option(
      '--rounds <n>',
      'rounds; verifiers and sets run in a shuffled order each',
      positiveInt,
      3,
    )
    .option('--content-chars <n>', 'characters of content per event', positiveInt, 280)
    .option('--seed <n>', 'seed of the content and the order', positiveInt, 1)
    .option(
      '--pool-threads <list>',
      "worker-thread pools to compare with inline verification, threads each ('none': skip)",
      threadList,
      [1, 2],
    )
    .option(
      '--pool-events <n>',
      'events verified at once per arm and round in the worker-thread comparison',
      positiveInt,
      2000,
    )
    .option('--pool-batch <n>', 'events per message to a worker at most', positiveInt, 64)
    .option(
      '--latency-events <n>',
      'events verified one at a time per arm and round, for the added latency',
      positiveInt,
      200,
    )
    .option('--out <dir>', 'also write <dir>/verify.json')
    .action(async (flags: VerifyFlags) => {
      const { runVerifyBench, formatVerifyBench } = await import('../bench/verify-bench.js');
      const result = await runVerifyBench(
        {
          events: flags.events,
          rounds: flags.rounds,
          contentChars: flags.contentChars,
          seed: flags.seed,
          poolThreads: flags.poolThreads,
          poolEvents: flags.poolEvents,
          poolBatch: flags.poolBatch,
          latencyEvents: flags.latencyEvents,
        },
        (line) => console.error(line),
      );
      console.log(formatVerifyBench(result));
      if (flags.out) {
        const { writeResult } = await import('../bench/results.js');
        const file = writeResult(flags.out, 'verify.json', 'bench-verify', { ...result });
        console.log(`\nresults: ${file}`);
      }
    });
}
