import { Option } from 'commander';
import type { Command } from 'commander';
import { FLOOR_SHAPES } from '../bench/run/config.js';
import type { FloorShape } from '../bench/run/config.js';
import { stopOnSignals } from './signals.js';
import { listenPort } from './flags.js';
import { readyLine } from '../util/ready-line.js';

/** `sluice bench ws-floor`: the Nostr benchmarks' floor (a bare ws proxy, bench/ws-floor.ts). */
export function registerWsFloor(bench: Command): void {
  bench
    .command('ws-floor')
    .description(
      'the floors of the Nostr benchmarks: a bare Node proxy passing every message on (no parsing, no quotas)',
    )
    .option('--host <host>', 'address to listen on', '127.0.0.1')
    .option('--port <n>', 'port to listen on (0: a free one)', listenPort, 0)
    .requiredOption('--upstream <url>', "the relay's base URL")
    .addOption(
      new Option('--shape <shape>', 'which floor (see bench/ws-floor.ts)')
        .choices(FLOOR_SHAPES)
        .default('ws'),
    )
    .action(async (flags: { host: string; port: number; upstream: string; shape: FloorShape }) => {
      const { startWsFloor } = await import('../bench/ws-floor.js');
      const starting = startWsFloor(flags);
      stopOnSignals(10_000, async () => (await starting).close());
      const started = await starting;
      // The one line on stdout; the harness waits for it.
      console.log(readyLine({ ready: 'peer', url: started.url, settings: {} }));
    });
}
