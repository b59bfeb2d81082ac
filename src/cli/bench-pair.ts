import type { Command } from 'commander';
import { checkPinning, parseCpuList } from '../harness/pinning.js';
import { positiveInt } from './flags.js';

interface PairFlags {
  a: string;
  b: string;
  valkey: string;
  connections: number;
  keys: number;
  warmup: number;
  duration: number;
  rounds: number;
  orders: number;
  gatewayCpus?: number[];
  loadCpus?: number[];
  out?: string;
}

/** `sluice bench pair`: two gateways under the same load at the same time (bench/pair.ts). */
export function registerBenchPair(bench: Command): void {
  bench
    .command('pair')
    .description(
      'two gateways side by side in one run: both under the HTTP light load at once, on one ' +
        'relay and one Valkey, each order of start in turn; prints b/a for rate and CPU a request',
    )
    .requiredOption('--a <implementation>', 'the baseline, e.g. quotas-off (optionally :cluster)')
    .requiredOption('--b <implementation>', 'the one compared, e.g. iovalkey+lease')
    .requiredOption('--valkey <host:port>', 'any node of the Valkey both use')
    .option('--connections <n>', 'connections of each gateway', positiveInt, 25)
    .option('--keys <n>', 'distinct client addresses', positiveInt, 1000)
    .option('--warmup <s>', 'seconds of unmeasured load first, per order', positiveInt, 3)
    .option('--duration <s>', 'seconds of each measured round', positiveInt, 10)
    .option('--rounds <n>', 'measured rounds per order', positiveInt, 3)
    .option('--orders <n>', 'orders of start, alternating (a first, b first, ...)', positiveInt, 2)
    .option(
      '--gateway-cpus <list>',
      'run both gateways on these cores (taskset), e.g. 1: they share them under one scheduler',
      parseCpuList,
    )
    .option(
      '--load-cpus <list>',
      'run the relay and the load generator on these cores, e.g. 0 (with --gateway-cpus)',
      parseCpuList,
    )
    .option('--out <file>', 'write the result as JSON here too')
    .action(async (flags: PairFlags) => {
      if (flags.gatewayCpus) checkPinning(flags.gatewayCpus, '--gateway-cpus');
      if (flags.loadCpus) checkPinning(flags.loadCpus, '--load-cpus');
      const { parseNodeAddress } = await import('../store/options.js');
      const { runPair } = await import('../bench/pair.js');
      const result = await runPair({
        a: flags.a,
        b: flags.b,
        valkey: parseNodeAddress(flags.valkey),
        connections: flags.connections,
        keys: flags.keys,
        warmupSec: flags.warmup,
        durationSec: flags.duration,
        rounds: flags.rounds,
        orders: flags.orders,
        gatewayCpus: flags.gatewayCpus ?? null,
        loadCpus: flags.loadCpus ?? null,
        log: (line) => console.error(line),
      });
      if (flags.out) {
        const { writeFileSync } = await import('node:fs');
        writeFileSync(flags.out, JSON.stringify(result, null, 2) + '\n');
      }
      const failed = result.rounds.reduce((n, r) => n + r.a.failed + r.b.failed, 0);
      console.log(
        `${flags.b} / ${flags.a}: rate ${result.rateRatio.toFixed(3)}, CPU a request ` +
          `${result.cpuRatio.toFixed(3)} (geometric means of ${result.rounds.length} rounds in ${flags.orders} orders)` +
          (failed > 0 ? `; ${failed} requests failed: not a fair comparison` : ''),
      );
      if (failed > 0) process.exitCode = 2;
    });
}
