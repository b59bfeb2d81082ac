import type { Command } from 'commander';
import { positiveInt } from './valkey.js';
import { registerBenchRun, registerRelayInstall } from './bench-run.js';
import { registerPeer } from './bench-peer.js';
import { registerBenchVerify } from './bench-verify.js';
import { registerClientsBench } from './bench-clients.js';
import type { SmokeTarget } from '../bench/smoke.js';
import { parseNodeAddress } from '../store/options.js';

interface GatewayBenchFlags {
  duration: number;
  warmup: number;
  connections: number;
  rounds: number;
  clients: string;
  identities: number;
  out?: string;
  seed: number;
}

interface SmokeFlags {
  standalone?: string;
  cluster?: string;
}

export function registerBench(program: Command): void {
  const bench = program.command('bench').description('benchmarks and smoke runs');
  registerBenchRun(bench);
  registerRelayInstall(bench);
  registerPeer(bench);
  registerBenchVerify(bench);
  registerClientsBench(bench);
  bench
    .command('smoke')
    .description('consume through each client on each topology and check the counts')
    .option('--standalone <host:port>', 'a standalone Valkey')
    .option('--cluster <host:port>', 'any node of a Valkey cluster')
    .action(async (flags: SmokeFlags) => {
      const { DEFAULT_SMOKE_PLAN, formatSmokeTable, isCorrect, runSmoke } =
        await import('../bench/smoke.js');
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

  bench
    .command('gateway')
    .description(
      'gateway throughput and latency, quotas off vs on per client, and the rejection path ' +
        '(starts its own Valkey, relay and gateways on 127.0.0.1)',
    )
    .option('--duration <s>', 'seconds per measured run', positiveInt, 10)
    .option('--warmup <s>', 'seconds of unrecorded warm-up per arm', positiveInt, 3)
    .option('--connections <n>', 'concurrent connections', positiveInt, 50)
    .option(
      '--rounds <n>',
      'rounds; arms run interleaved in a shuffled order each round',
      positiveInt,
      3,
    )
    .option('--clients <list>', 'comma-separated clients', 'valkey-glide,iovalkey,ioredis')
    .option('--identities <n>', 'distinct client identities in the load', positiveInt, 1000)
    .option('--seed <n>', 'seed of the arm order', positiveInt, 1)
    .option('--out <dir>', 'results directory (default results/<timestamp>)')
    .action(async (flags: GatewayBenchFlags) => {
      const { CLIENT_KINDS } = await import('../store/options.js');
      const clients = flags.clients.split(',').map((c) => c.trim());
      const unknown = clients.find((c) => !(CLIENT_KINDS as readonly string[]).includes(c));
      if (unknown) throw new Error(`--clients: unknown client "${unknown}"`);
      const { runGatewayBench, formatGatewaySummary } = await import('../bench/gateway-bench.js');
      const { defaultResultsDir } = await import('../bench/results.js');
      const outDir = flags.out ?? defaultResultsDir();
      const { summary, file } = await runGatewayBench(
        {
          durationSec: flags.duration,
          warmupSec: flags.warmup,
          connections: flags.connections,
          rounds: flags.rounds,
          clients: clients as (typeof CLIENT_KINDS)[number][],
          identities: flags.identities,
          outDir,
          seed: flags.seed,
        },
        (line) => console.error(line),
      );
      console.log(formatGatewaySummary(summary));
      console.log(`\nresults: ${file}`);
    });

  bench
    .command('adaptive')
    .description(
      'closed loop on a real relay: a write flood at several times its drain, with no ' +
        'adaptation, the reference PID law and the sluice lead law (own Valkey, relay, feed, gateways)',
    )
    .option('--overload-sec <s>', 'seconds of overload per variant', positiveInt, 180)
    .option('--calm-sec <s>', 'seconds of sustainable load first', positiveInt, 20)
    .option('--overload <x>', 'offered load as a multiple of the drain', positiveInt, 3)
    .option('--drain-mib <n>', 'relay drain, MiB/s', positiveInt, 2)
    .option('--headroom-mib <n>', 'target memory above the idle relay, MiB', positiveInt, 96)
    .option('--tick-ms <n>', 'feed tick', positiveInt, 500)
    .option('--variants <list>', 'comma-separated: none, pid, lead', 'none,pid,lead')
    .option('--out <dir>', 'results directory (default results/<timestamp>)')
    .action(
      async (flags: {
        overloadSec: number;
        calmSec: number;
        overload: number;
        drainMib: number;
        headroomMib: number;
        tickMs: number;
        variants: string;
        out?: string;
      }) => {
        const variants = flags.variants.split(',').map((v) => v.trim());
        const bad = variants.find((v) => !['none', 'pid', 'lead'].includes(v));
        if (bad) throw new Error(`--variants: unknown variant "${bad}"`);
        const { runAdaptiveBench, formatAdaptiveSummary } =
          await import('../bench/adaptive-bench.js');
        const { defaultResultsDir } = await import('../bench/results.js');
        const { summaries, file } = await runAdaptiveBench(
          {
            overloadSec: flags.overloadSec,
            calmSec: flags.calmSec,
            overload: flags.overload,
            drainBytesPerSec: flags.drainMib * 1024 * 1024,
            eventContentBytes: 32 * 1024,
            headroomBytes: flags.headroomMib * 1024 * 1024,
            tickMs: flags.tickMs,
            variants: variants as ('none' | 'pid' | 'lead')[],
            outDir: flags.out ?? defaultResultsDir(),
          },
          (line) => console.error(line),
        );
        console.log(formatAdaptiveSummary(summaries));
        console.log(`\nresults: ${file}`);
      },
    );

  bench
    .command('simulate')
    .description('the three variants on the simulated relay plant (deterministic, instant)')
    .option('--factor <x>', 'overload as a multiple of the drain', positiveInt, 3)
    .action(async (flags: { factor: number }) => {
      const { simulateVariants, formatSimulation } = await import('../bench/simulate.js');
      console.log(formatSimulation(simulateVariants(flags.factor)));
    });
}
