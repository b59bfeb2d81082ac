import type { Command } from 'commander';
import { InvalidArgumentError } from 'commander';
import { positiveInt, positiveNumber, share } from './flags.js';

interface ScaleFlags {
  simulate?: boolean;
  validate?: string;
  client: string;
  autoPipelining: boolean;
  matrix?: string;
  gateways: number;
  workers: number;
  primaries: number;
  identities: number;
  writesPerSec: number;
  durationSec: number;
  limit: number;
  windowSec: number;
  leases: boolean;
  failover?: boolean;
  pauseOnly?: boolean;
  migration?: boolean;
  lostMs: number;
  pauseMs: number;
  hotShare: number;
  zipf: number;
  churnPerSec: number;
  serviceRate: number;
  hop: 'loopback' | 'datacenter';
  tickMs: number;
  timeoutMs: number;
  retryMs: number;
  seed: number;
  out?: string;
}

function sizesOf(text: string): number[] {
  const sizes = text.split(',').map((s) => Number(s.trim()));
  if (sizes.some((s) => ![0, 1, 2].includes(s))) {
    throw new InvalidArgumentError(`"${text}": sizes are 0, 1, 2 (comma-separated)`);
  }
  return sizes;
}

/** sluice bench scale --simulate: the real decider on a virtual clock against a Valkey model. */
export function registerScaleBench(bench: Command): void {
  bench
    .command('scale')
    .description(
      'quotas at scale: --simulate runs the real decider, lease book and consumers of every ' +
        'gateway on a virtual clock against a Valkey Cluster model (docs/BENCHMARKS.md, ' +
        '"Scale simulation")',
    )
    .option('--simulate', 'simulate (required: the real scaled-down run is apart)')
    .option(
      '--validate <host:port>',
      'also run the same configuration for real, leases off and on, with in-process ' +
        'deciders against the Valkey Cluster at this seed node, and compare the figures',
    )
    .option('--client <kind>', 'Valkey client of the real run', 'ioredis')
    .option('--no-auto-pipelining', "the real run's clients send each command on its own")
    .option(
      '--matrix <sizes>',
      'run the documented table instead of one configuration: sizes 0,1,2 ' +
        '(3x3x1k, 12x6x1M, 100x30x10M), each steady and with faults, leases off and on',
    )
    .option('--gateways <n>', 'gateways', positiveInt, 3)
    .option('--workers <n>', 'worker processes per gateway', positiveInt, 1)
    .option('--primaries <n>', 'Valkey primaries', positiveInt, 3)
    .option('--identities <n>', 'live identities (Zipf ranks)', positiveInt, 1000)
    .option('--writes-per-sec <n>', 'writes a second, all gateways', positiveInt, 10_000)
    .option('--duration-sec <s>', 'virtual seconds of traffic', positiveNumber, 3)
    .option('--limit <n>', 'write quota: points per window', positiveInt, 200)
    .option('--window-sec <n>', 'the quota window', positiveInt, 1)
    .option('--no-leases', 'quota leases off (one Valkey consume a write)')
    .option('--failover', "fail the hot key's primary a third of the way in")
    .option('--pause-ms <n>', 'failover: no primary for this long', positiveInt, 250)
    .option(
      '--lost-ms <n>',
      'failover: writes of this last stretch never reached the replica',
      positiveInt,
      100,
    )
    .option(
      '--pause-only',
      'with --failover: a CLIENT PAUSE of the primary instead (commands wait, nothing lost; ' +
        'what --validate can do for real)',
    )
    .option('--migration', "migrate the hot key's slot to the next primary from half way in")
    .option('--hot-share <x>', 'share of writes to the hot key (every gateway)', share, 0.02)
    .option('--zipf <s>', 'Zipf exponent of identity popularity', positiveNumber, 1)
    .option(
      '--churn-per-sec <x>',
      'each rank changes identity this often a second',
      positiveNumber,
      0.1,
    )
    .option('--service-rate <n>', 'commands a primary serves a second', positiveInt, 150_000)
    .option('--hop <kind>', 'network latency: loopback or datacenter', 'datacenter')
    .option('--timeout-ms <n>', "the Valkey client's command timeout", positiveInt, 250)
    .option('--retry-ms <n>', 'quotas.retryStoreAfterMs', positiveInt, 250)
    .option('--tick-ms <ms>', 'time resolution of the simulation', positiveNumber, 0.05)
    .option('--seed <n>', 'random seed', positiveInt, 1)
    .option('--out <dir>', 'results directory (default results/<timestamp>)')
    .action(async (flags: ScaleFlags) => {
      if (!flags.simulate) {
        throw new InvalidArgumentError('bench scale runs simulated only: pass --simulate');
      }
      if (flags.hop !== 'loopback' && flags.hop !== 'datacenter') {
        throw new InvalidArgumentError(`--hop "${String(flags.hop)}": loopback or datacenter`);
      }
      const { DEFAULT_SCALE } = await import('../bench/scale/config.js');
      const { matrixConfigs } = await import('../bench/scale/matrix.js');
      const { simulateScale } = await import('../bench/scale/simulation.js');
      const { formatScaleTable } = await import('../bench/scale/report.js');
      const { showResult } = await import('../bench/results.js');
      const base = {
        ...DEFAULT_SCALE,
        gateways: flags.gateways,
        workers: flags.workers,
        primaries: flags.primaries,
        identities: flags.identities,
        writesPerSec: flags.writesPerSec,
        durationSec: flags.durationSec,
        limit: flags.limit,
        windowSec: flags.windowSec,
        leases: flags.leases,
        failover: flags.failover ?? false,
        failoverPauseMs: flags.pauseMs,
        pauseOnly: flags.pauseOnly,
        failoverLostMs: flags.lostMs,
        migration: flags.migration ?? false,
        hotShare: flags.hotShare,
        zipf: flags.zipf,
        churnPerSec: flags.churnPerSec,
        serviceRatePerSec: flags.serviceRate,
        hop: flags.hop,
        tickMs: flags.tickMs,
        timeoutMs: flags.timeoutMs,
        retryStoreAfterMs: flags.retryMs,
        seed: flags.seed,
      };
      if (flags.validate) {
        const { parseNodeAddress } = await import('../store/index.js');
        const { validateScale } = await import('../bench/scale/validate.js');
        const seed = parseNodeAddress(flags.validate);
        await validateScale(base, seed, flags.client as never, flags.out, flags.autoPipelining);
        return;
      }
      const configs = flags.matrix ? matrixConfigs(base, sizesOf(flags.matrix)) : [base];
      const results = [];
      for (const cfg of configs) {
        const r = await simulateScale(cfg);
        console.error(
          `simulated ${cfg.gateways} gateways x ${cfg.primaries} primaries x ${cfg.identities} ` +
            `identities, leases ${cfg.leases ? 'on' : 'off'}: ${r.wallSec.toFixed(1)} s`,
        );
        results.push(r);
      }
      const command = `sluice bench scale ${process.argv.slice(4).join(' ')}`.trim();
      showResult(flags.out, 'scale-sim', { command, results }, formatScaleTable(results));
    });
}
