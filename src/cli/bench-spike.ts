import { Option } from 'commander';
import type { Command } from 'commander';
import type { Pace, SpikeVariant } from '../bench/spike-bench.js';
import { parseNodeAddress } from '../store/options.js';
import type { ClientKind } from '../store/options.js';
import {
  listOf,
  parseBytes,
  positiveInt,
  positiveNumber,
  share,
  valkeyClientOption,
} from './flags.js';

const SPIKE_VARIANTS: readonly SpikeVariant[] = ['spike', 'burst'];
const PACES: readonly Pace[] = ['fast', 'slow'];

interface SpikeFlags {
  variants: string[];
  paces: string[];
  trials: number;
  drain: number;
  headroom: number;
  level: number;
  spikeShare: number;
  eventBytes: number;
  steadyShare: number;
  burstEventBytes: number;
  burstSec: number;
  watchSec: number;
  tickMs: number;
  fastTickMs: number;
  feedSource: 'pid' | 'relay';
  valkey?: string;
  valkeyClient: ClientKind;
  out?: string;
}

/** `sluice bench spike`: reaction time and peak memory when a relay's memory jumps. */
export function registerSpikeBench(bench: Command): void {
  bench
    .command('spike')
    .description(
      "sudden spikes: a reference relay under a steady write load, its feed and two gateways; the relay's " +
        'memory jumps (/admin/spike, or a burst of large events at the full quota); reaction time ' +
        '(spike -> both gateways lower) and peak memory / target, fast tick on and off',
    )
    .option('--variants <list>', 'spike, burst', listOf(SPIKE_VARIANTS, '--variants'), [
      ...SPIKE_VARIANTS,
    ])
    .option(
      '--paces <list>',
      "fast (the feed's fast tick on), slow (off)",
      listOf(PACES, '--paces'),
      [...PACES],
    )
    .option('--trials <n>', 'spikes or bursts per arm', positiveInt, 3)
    .option('--drain <bytes>', "the relay's drain rate per second", parseBytes, 2 * 1024 * 1024)
    .option(
      '--headroom <bytes>',
      "target = the idle relay's memory + this",
      parseBytes,
      128 * 1024 * 1024,
    )
    .option(
      '--level <u>',
      'memory / target before the spikes (a held allocation; 0: none)',
      share,
      0.75,
    )
    .option('--spike-share <x>', 'spike: this share of what is left below the target', share, 0.6)
    .option('--event-bytes <bytes>', "content of the steady writers' events", parseBytes, 32 * 1024)
    .option(
      '--steady-share <x>',
      'the steady write rate, as a share of what the relay drains',
      positiveNumber,
      0.9,
    )
    .option(
      '--burst-event-bytes <bytes>',
      'burst: content of each large event',
      parseBytes,
      120 * 1024,
    )
    .option('--burst-sec <s>', 'burst: seconds at the full quota', positiveNumber, 3)
    .option(
      '--watch-sec <s>',
      'seconds watched after each spike or burst starts',
      positiveNumber,
      6,
    )
    .option('--tick-ms <n>', "the feed's tick", positiveInt, 500)
    .option('--fast-tick-ms <n>', "the feed's fast tick (pace fast)", positiveInt, 50)
    .addOption(
      new Option(
        '--feed-source <s>',
        "what the feed samples: pid (the relay's /proc) or relay (its /metrics, answered between its writes)",
      )
        .choices(['pid', 'relay'])
        .default('pid'),
    )
    .option('--valkey <host:port>', 'a standalone Valkey to use (default: start one)')
    .addOption(valkeyClientOption('Valkey client of the feed and gateways', 'ioredis'))
    .option('--out <dir>', 'results directory (default results/<timestamp>)')
    .action(async (flags: SpikeFlags) => {
      if (flags.fastTickMs > flags.tickMs)
        throw new Error('--fast-tick-ms must not exceed --tick-ms');
      const { formatSpikeBench, runSpikeBench } = await import('../bench/spike-bench.js');
      const opts = {
        variants: flags.variants as SpikeVariant[],
        paces: flags.paces as Pace[],
        trials: flags.trials,
        drainBytesPerSec: flags.drain,
        headroomBytes: flags.headroom,
        level: flags.level,
        spikeShare: flags.spikeShare,
        eventContentBytes: flags.eventBytes,
        steadyShare: flags.steadyShare,
        burstContentBytes: flags.burstEventBytes,
        burstSec: flags.burstSec,
        watchSec: flags.watchSec,
        tickMs: flags.tickMs,
        fastTickMs: flags.fastTickMs,
        feedSource: flags.feedSource,
        valkeyClient: flags.valkeyClient,
        ...(flags.valkey ? { valkey: parseNodeAddress(flags.valkey) } : {}),
      };
      const results = await runSpikeBench(opts, (line) => console.error(line));
      const { showResult } = await import('../bench/results.js');
      const note = 'relay, feed, two gateways, Valkey and the load generator share this machine';
      const table = formatSpikeBench(results, opts);
      showResult(flags.out, 'spike-bench', { options: opts, note, results }, table);
    });
}
