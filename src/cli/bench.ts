import type { Command } from 'commander';
import { registerBenchRun, registerRelayInstall } from './bench-run.js';
import { registerPeer } from './bench-peer.js';
import { registerBenchVerify } from './bench-verify.js';
import { registerClientsBench } from './bench-clients.js';
import { positiveInt } from './flags.js';

export function registerBench(program: Command): void {
  const bench = program
    .command('bench')
    .description('benchmarks: bench run (what run-all.sh drives), and single-purpose measurements');
  registerBenchRun(bench);
  registerRelayInstall(bench);
  registerPeer(bench);
  registerBenchVerify(bench);
  registerClientsBench(bench);
  bench
    .command('simulate')
    .description('the three variants on the simulated relay plant (deterministic, instant)')
    .option('--factor <x>', 'overload as a multiple of the drain', positiveInt, 3)
    .action(async (flags: { factor: number }) => {
      const { simulateVariants, formatSimulation } = await import('../bench/simulate.js');
      console.log(formatSimulation(simulateVariants(flags.factor)));
    });
}
