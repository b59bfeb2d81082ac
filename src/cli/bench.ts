import type { Command } from 'commander';
import { DEFAULT_SMOKE_PLAN, formatSmokeTable, isCorrect, runSmoke } from '../bench/smoke.js';
import type { SmokeTarget } from '../bench/smoke.js';
import { parseNodeAddress } from '../store/index.js';

interface SmokeFlags {
  standalone?: string;
  cluster?: string;
}

export function registerBench(program: Command): void {
  const bench = program.command('bench').description('benchmarks and smoke runs');
  bench
    .command('smoke')
    .description('consume through each client on each topology and check the counts')
    .option('--standalone <host:port>', 'a standalone Valkey')
    .option('--cluster <host:port>', 'any node of a Valkey cluster')
    .action(async (flags: SmokeFlags) => {
      const targets: SmokeTarget[] = [];
      if (flags.standalone)
        targets.push({ mode: 'standalone', nodes: [parseNodeAddress(flags.standalone)] });
      if (flags.cluster)
        targets.push({ mode: 'cluster', nodes: [parseNodeAddress(flags.cluster)] });
      if (targets.length === 0) throw new Error('give --standalone and/or --cluster');
      const plan = DEFAULT_SMOKE_PLAN;
      console.log(
        `smoke: ${plan.keys} keys x ${plan.consumesPerKey} consumes against ${plan.pointsPerKey} points each, ${plan.concurrency} in flight (not a benchmark)`,
      );
      const rows = await runSmoke(targets, plan);
      console.log(formatSmokeTable(rows));
      if (!rows.every(isCorrect)) process.exitCode = 1;
    });
}
