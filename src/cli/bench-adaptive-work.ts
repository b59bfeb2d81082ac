import type { Command } from 'commander';
import { InvalidArgumentError } from 'commander';
import { positiveInt, positiveNumber } from './flags.js';

interface AdaptiveWorkFlags {
  multipliers: string;
  secondsPerStep: number;
  spamConnections: number;
  memberPerSec: number;
  bitsPerHalving: number;
  maxDifficulty: number;
  valkey?: string;
  out?: string;
}

function multipliersOf(text: string): number[] {
  const ms = text.split(',').map((s) => Number(s.trim()));
  if (ms.some((m) => !(m >= 0 && m <= 1))) {
    throw new InvalidArgumentError(`"${text}": multipliers in [0, 1], comma-separated`);
  }
  return ms;
}

/** sluice bench adaptive-work: a spam wave against a member as the multiplier falls. */
export function registerAdaptiveWorkBench(bench: Command): void {
  bench
    .command('adaptive-work')
    .description(
      'a spam wave of fresh keys (one thread mining each event to the difficulty in force) ' +
        "against a member's steady writes, as the node's multiplier steps down, with " +
        'nostr.pow.adaptive off and on (docs/BENCHMARKS.md)',
    )
    .option('--multipliers <list>', 'the steps of the multiplier', '1,0.5,0.25,0.125')
    .option('--seconds-per-step <s>', 'seconds measured per step', positiveNumber, 8)
    .option('--spam-connections <n>', "the wave's connections (addresses)", positiveInt, 16)
    .option('--member-per-sec <n>', "the member's events a second", positiveNumber, 1)
    .option('--bits-per-halving <n>', 'nostr.pow.adaptive.bitsPerHalving', positiveNumber, 4)
    .option('--max-difficulty <n>', 'nostr.pow.adaptive.maxDifficulty', positiveInt, 28)
    .option('--valkey <host:port>', 'a standalone Valkey (else one of its own)')
    .option('--out <dir>', 'results directory (default results/<timestamp>)')
    .action(async (flags: AdaptiveWorkFlags) => {
      const { runAdaptiveWorkBench, formatAdaptiveWork } =
        await import('../bench/adaptive-work/adaptive-work-bench.js');
      const { parseNodeAddress } = await import('../store/index.js');
      const { showResult } = await import('../bench/results.js');
      const steps = await runAdaptiveWorkBench(
        {
          multipliers: multipliersOf(flags.multipliers),
          secondsPerStep: flags.secondsPerStep,
          spamConnections: flags.spamConnections,
          memberPerSec: flags.memberPerSec,
          bitsPerHalving: flags.bitsPerHalving,
          maxDifficulty: flags.maxDifficulty,
          ...(flags.valkey ? { valkey: parseNodeAddress(flags.valkey) } : {}),
        },
        (line) => console.error(line),
      );
      const command = `sluice bench adaptive-work ${process.argv.slice(4).join(' ')}`.trim();
      showResult(flags.out, 'adaptive-work', { command, steps }, formatAdaptiveWork(steps));
    });
}
