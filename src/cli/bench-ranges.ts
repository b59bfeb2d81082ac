import { InvalidArgumentError } from 'commander';
import type { Command } from 'commander';
import { parseNodeAddress } from '../store/options.js';
import type { ClientKind } from '../store/options.js';
import { positiveInt, valkeyClientOption } from './flags.js';

interface RangesFlags {
  ranges: boolean;
  rotate: 64 | 56 | 48;
  duration: number;
  floodConnections: number;
  honest: number;
  honestRate: number;
  points: number;
  windowSec: number;
  valkey?: string;
  valkeyClient: ClientKind;
  out?: string;
}

function rotation(value: string): 64 | 56 | 48 {
  if (value === '64' || value === '56' || value === '48') return Number(value) as 64 | 56 | 48;
  throw new InvalidArgumentError('expected 64, 56 or 48');
}

/** `sluice bench ranges`: a flood rotating networks beside honest writers (issue 34). */
export function registerRangesBench(bench: Command): void {
  bench
    .command('ranges')
    .description(
      'address ranges under a flood: a flood naming a new /64 (or /56, /48) on every write beside ' +
        'honest writers of another /48, and what each is accepted (starts its own gateway, and ' +
        'Valkey unless given)',
    )
    .option('--no-ranges', 'quotas.ranges off (the comparison)')
    .option(
      '--rotate <bits>',
      'what the flood rotates: the /64s of a /56, /56s of a /48, /48s',
      rotation,
      64,
    )
    .option('--duration <s>', 'seconds of load', positiveInt, 30)
    .option('--flood-connections <n>', "the flood's closed-loop connections", positiveInt, 16)
    .option('--honest <n>', 'honest writers, each alone in a /64 of another /48', positiveInt, 4)
    .option('--honest-rate <n>', 'writes a second of each honest writer', positiveInt, 5)
    .option('--points <n>', 'write points per /64 per window (/56: 4x, /48: 8x)', positiveInt, 100)
    .option('--window-sec <s>', 'the window of every limit', positiveInt, 10)
    .option('--valkey <host:port>', 'a standalone Valkey to use (default: start one)')
    .addOption(valkeyClientOption("the gateway's Valkey client"))
    .option('--out <dir>', 'results directory (default results/<timestamp>)')
    .action(async (flags: RangesFlags) => {
      const { formatRangesBench, runRangesBench } = await import('../bench/ranges-bench.js');
      const opts = {
        ranges: flags.ranges,
        rotate: flags.rotate,
        durationSec: flags.duration,
        floodConnections: flags.floodConnections,
        honest: flags.honest,
        honestRate: flags.honestRate,
        points: flags.points,
        windowSec: flags.windowSec,
        valkeyClient: flags.valkeyClient,
        ...(flags.valkey ? { valkey: parseNodeAddress(flags.valkey) } : {}),
      };
      const result = await runRangesBench(opts, (line) => console.error(line));
      const { showResult } = await import('../bench/results.js');
      const note = 'load generator, stub relay, gateway and Valkey share this machine';
      showResult(
        flags.out,
        'ranges-bench',
        { options: opts, note, result },
        formatRangesBench(result, opts),
      );
      if (!result.held) process.exitCode = 1;
    });
}
