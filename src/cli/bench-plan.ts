import { InvalidArgumentError } from 'commander';
import type { Command } from 'commander';
import type { PlanOptions } from '../bench/run/plan.js';
import { integerIn, positiveInt, relayImplOption } from './flags.js';

/** "50 100" or "50,100": connection counts. */
function connectionCounts(value: string): number[] {
  const counts = value.split(/[\s,]+/).filter(Boolean);
  if (counts.length === 0) throw new InvalidArgumentError('needs at least one value');
  return counts.map(positiveInt);
}

/** `sluice bench plan`: the runs of a session, as run-all.sh makes them. */
export function registerBenchPlan(bench: Command): void {
  bench
    .command('plan')
    .description(
      'the runs of a benchmark session as JSON lines: the session (settings, what to start), ' +
        'then each run in order with its run-benchmark.sh settings, then the commands ' +
        '(fleet, spike, step, oom); run-all.sh takes the same options and runs it',
    )
    .option(
      '--quick',
      'each client x topology x workload (and law) once, 2 s runs, no warm-up, 500 identities',
    )
    .option(
      '--clients <list>',
      'clients or groups: all | standalone | cluster | lease (default all)',
    )
    .option(
      '--workload <list>',
      'workloads or groups: light | heavy | both | flood | nostr | adaptive | fleet | spike | step | ' +
        'everything, or oom, or a variant such as nostr-sender-only (default both)',
    )
    .option('--duration-mode <mode>', 'dynamic | fixed30 | fixed120 | custom:N (default dynamic)')
    .option('--concurrency <list>', 'connection counts (default "50 100")', connectionCounts)
    .option('--runs <n>', 'runs per configuration (default 3)', positiveInt)
    .option(
      '--warmup <s>',
      'unrecorded seconds before each run (default 3)',
      integerIn(0, 3600, 'a whole number of seconds'),
    )
    .option('--keys <n>', 'client identities in the load (default 10000)', positiveInt)
    .option('--no-baselines', 'no quotas-off or peer runs (relay-alone stays)')
    .addOption(relayImplOption('the relay under the runs'))
    .option('--rate <n>', 'HTTP workloads: offered requests/s (open loop)', positiveInt)
    .option('--seed <n>', 'seed of the run order (default 1)', positiveInt)
    .option('--tsv', 'tab-separated lines, as run-all.sh reads them (bash reads no JSON)')
    .action(async (flags: PlanOptions & { tsv?: boolean }) => {
      const { plan, planLines } = await import('../bench/run/plan.js');
      const { tsv, ...options } = flags;
      const entries = plan(options);
      const lines = tsv ? planLines(entries) : entries.map((e) => JSON.stringify(e));
      process.stdout.write(lines.map((l) => `${l}\n`).join(''));
    });
}
