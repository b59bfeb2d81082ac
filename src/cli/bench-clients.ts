import type { Command } from 'commander';
import { parseNodeAddress } from '../store/options.js';
import type { ClientKind } from '../store/options.js';
import { positiveInt, valkeyClientOption } from './flags.js';

interface ClientsFlags {
  clients: number;
  connections: number;
  valkey?: string;
  valkeyClient: ClientKind;
  maxTrackedClients?: number;
  settleSec: number;
  out?: string;
}

/** `sluice bench clients`: the gateway's RSS before and after N distinct clients. */
export function registerClientsBench(bench: Command): void {
  bench
    .command('clients')
    .description(
      "memory per client: the gateway's RSS before and after N distinct clients (X-Forwarded-For), " +
        'each over a limit of 1 write per window once (starts its own gateway, and Valkey unless given)',
    )
    .option('--clients <n>', 'distinct clients (1000000 for the long run)', positiveInt, 100_000)
    .option('--connections <n>', 'concurrent connections', positiveInt, 32)
    .option('--valkey <host:port>', 'a standalone Valkey to use (default: start one)')
    .addOption(valkeyClientOption("the gateway's Valkey client"))
    .option(
      '--max-tracked-clients <n>',
      "the gateway's limits.maxTrackedClients (default: its default)",
      positiveInt,
    )
    .option('--settle-sec <s>', 'seconds after the load before reading RSS', positiveInt, 3)
    .option('--out <dir>', 'results directory (default results/<timestamp>)')
    .action(async (flags: ClientsFlags) => {
      const { formatClientsBench, runClientsBench } = await import('../bench/clients-bench.js');
      const opts = {
        clients: flags.clients,
        connections: flags.connections,
        valkeyClient: flags.valkeyClient,
        settleSec: flags.settleSec,
        ...(flags.valkey ? { valkey: parseNodeAddress(flags.valkey) } : {}),
        ...(flags.maxTrackedClients ? { maxTrackedClients: flags.maxTrackedClients } : {}),
      };
      const result = await runClientsBench(opts, (line) => console.error(line));
      const { showResult } = await import('../bench/results.js');
      const note = 'load generator, stub relay, gateway and Valkey share this machine';
      const table = formatClientsBench(result, opts);
      showResult(flags.out, 'clients-bench', { options: opts, note, result }, table);
      if (!result.exact) process.exitCode = 1;
    });
}
