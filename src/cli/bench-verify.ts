import type { Command } from 'commander';
import { positiveInt } from './flags.js';

interface VerifyFlags {
  events: number;
  rounds: number;
  contentChars: number;
  seed: number;
  out?: string;
}

/** `sluice bench verify`: Nostr signature verifications per core, nostr-tools vs the gateway's. */
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
    .option('--out <dir>', 'also write <dir>/verify.json')
    .action(async (flags: VerifyFlags) => {
      const { runVerifyBench, formatVerifyBench } = await import('../bench/verify-bench.js');
      const result = await runVerifyBench(
        {
          events: flags.events,
          rounds: flags.rounds,
          contentChars: flags.contentChars,
          seed: flags.seed,
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
