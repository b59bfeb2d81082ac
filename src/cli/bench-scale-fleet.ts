import type { Command } from 'commander';
import type { FleetRunConfig } from '../bench/scale/fleet-config.js';
import { positiveInt, positiveNumber, share } from './flags.js';

type FleetFlags = Omit<
  FleetRunConfig,
  'zipf' | 'migrateKeyPauseMs' | 'reportsPerSec' | 'maxInFlightPerGateway'
> & { out?: string };

/** sluice bench scale-fleet: the scaled-down real run of issue 33 (docs/BENCHMARKS.md). */
export function registerScaleFleetBench(bench: Command): void {
  const d = { gateways: 12, identities: 1_000_000 };
  bench
    .command('scale-fleet')
    .description(
      'the scaled-down real run: gateway processes on loopback addresses of their own, a ' +
        "6-node Valkey Cluster of the run's own, a million-identity Zipf load and a hot key; " +
        "the hot key's primary is killed and its slot migrated under load; then pressure " +
        'reports timed from publication to applied on every subscriber',
    )
    .option('--gateways <n>', 'gateway processes (127.0.0.2 ...)', positiveInt, d.gateways)
    .option('--identities <n>', 'Zipf population of client addresses', positiveInt, d.identities)
    .option('--writes-per-sec <n>', 'offered writes a second, all gateways', positiveInt, 300)
    .option('--hot-share <x>', 'share of writes to the hot key', share, 0.1)
    .option('--limit <n>', 'write quota per client and window', positiveInt, 450)
    .option('--window-sec <n>', 'quota window (longer than the run)', positiveInt, 300)
    .option('--duration-sec <s>', 'seconds of load', positiveNumber, 60)
    .option('--kill-at-sec <s>', "kill the hot key's primary", positiveNumber, 12)
    .option('--migrate-at-sec <s>', "move the hot key's slot", positiveNumber, 35)
    .option('--node-timeout-ms <n>', 'cluster-node-timeout', positiveInt, 1000)
    .option('--subscribers <n>', 'pressure subscribers in all (gateways first)', positiveInt, 100)
    .option('--reports <n>', 'pressure reports timed', positiveInt, 200)
    .option('--cluster-base-port <n>', "first port of the run's cluster", positiveInt, 7440)
    .option('--seed <n>', 'random seed', positiveInt, 1)
    .option('--out <dir>', 'results directory (default results/<timestamp>)')
    .action(async (flags: FleetFlags) => {
      const { FLEET_DEFAULTS } = await import('../bench/scale/fleet-config.js');
      const { runFleet } = await import('../bench/scale/fleet-run.js');
      const { formatFleetResult } = await import('../bench/scale/fleet-report.js');
      const { showResult } = await import('../bench/results.js');
      const { out, ...chosen } = flags;
      const cfg = { ...FLEET_DEFAULTS, ...chosen };
      const result = await runFleet(cfg, (line) => console.error(line));
      const command = `sluice bench scale-fleet ${process.argv.slice(4).join(' ')}`.trim();
      showResult(out, 'scale-fleet', { command, result }, formatFleetResult(result));
    });
}
