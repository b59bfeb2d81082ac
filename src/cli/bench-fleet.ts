import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { InvalidArgumentError } from 'commander';
import type { Command } from 'commander';
import { ROUTING_MODES } from '../config/schema.js';
import type { RoutingMode } from '../config/schema.js';
import type { ClientKind } from '../store/options.js';
import { positiveInt, valkeyClientOption } from './flags.js';

interface FleetFlags {
  valkey?: string;
  valkeyClient: ClientKind;
  modes: RoutingMode[];
  seconds: number;
  degradeAt: number;
  settle: number;
  headroomMib: number[];
  degradeFactor: number[];
  quotaPerSec?: number;
  out?: string;
}

function routingModes(value: string): RoutingMode[] {
  const modes = value.split(',').map((m) => m.trim());
  for (const m of modes) {
    if (!(ROUTING_MODES as readonly string[]).includes(m)) {
      throw new InvalidArgumentError(`"${m}" is not a routing mode (${ROUTING_MODES.join(', ')})`);
    }
  }
  return modes as RoutingMode[];
}

/** A comma-separated list of numbers, each read by `one`. */
function numbers(one: (value: string) => number) {
  return (value: string): number[] => value.split(',').map((item) => one(item.trim()));
}

function shareOption(value: string): number {
  const x = Number(value);
  if (!(x > 0 && x <= 1)) throw new InvalidArgumentError(`"${value}" is not a share in (0, 1]`);
  return x;
}

/** `sluice bench fleet`: three relays, one degrades mid-run; one run per routing mode. */
export function registerFleetBench(bench: Command): void {
  bench
    .command('fleet')
    .description(
      'a fleet that routes around a sick node: three reference relays with lead-law feeds, two ' +
        "gateways, six HTTP writers at 0.9 x the fleet's sustainable rate, one node's drain cut " +
        'to a quarter mid-run; once per routing mode (writes fleet-bench.json and fleet-bench.md)',
    )
    .option('--valkey <host:port>', 'a standalone Valkey to use (default: start one)')
    .addOption(valkeyClientOption("the gateways' and feeds' Valkey client"))
    .option('--modes <list>', 'routing modes, comma-separated', routingModes, [...ROUTING_MODES])
    .option('--seconds <s>', 'seconds per mode', positiveInt, 90)
    .option('--degrade-at <s>', "when the sick node's drain is cut", positiveInt, 20)
    .option('--settle <s>', 'seconds after the cut before the measured window', positiveInt, 20)
    .option(
      '--headroom-mib <list>',
      'target = idle + this many MiB; a list runs each (e.g. 24,64,256)',
      numbers(positiveInt),
      [64],
    )
    .option(
      '--degrade-factor <list>',
      "the sick node's drain after the cut, as a share of the others'; a list runs each",
      numbers(shareOption),
      [0.25],
    )
    .option(
      '--quota-per-sec <n>',
      "each writer's quota per second (default: 1.25 x what it offers)",
      positiveInt,
    )
    .option('--out <dir>', 'results directory (default results/<timestamp>)')
    .action(async (flags: FleetFlags) => {
      const { FLEET_DEFAULTS, fleetWindowProblem, formatFleetTable, runFleetBench } =
        await import('../bench/fleet.js');
      const { runDir } = await import('../harness/paths.js');
      const { freeLoopbackPort } = await import('../harness/ports.js');
      const { startInstance, stopInstance } = await import('../valkey/embedded.js');
      const { defaultResultsDir, writeResult } = await import('../bench/results.js');
      const env = { ...process.env, SLUICE_RUN_DIR: path.join(runDir(), 'bench-fleet') };
      const log = (line: string) => console.error(line);
      const quiet = { info: () => undefined, warn: log };
      const own = flags.valkey
        ? undefined
        : { topology: 'standalone' as const, port: await freeLoopbackPort() };
      const valkey = flags.valkey ?? `127.0.0.1:${own!.port}`;
      const opts = {
        ...FLEET_DEFAULTS,
        modes: flags.modes,
        seconds: flags.seconds,
        degradeAtSec: flags.degradeAt,
        settleSec: flags.settle,
        ...(flags.quotaPerSec ? { quotaPerSec: flags.quotaPerSec } : {}),
        valkey: { client: flags.valkeyClient, nodes: [valkey] },
      };
      const problem = fleetWindowProblem(opts);
      if (problem) throw new Error(problem);
      const results = [];
      try {
        if (own) await startInstance(own, quiet, env);
        for (const mib of flags.headroomMib) {
          for (const degradeFactor of flags.degradeFactor) {
            const headroomBytes = mib * 1024 * 1024;
            log(`fleet: headroom ${mib} MiB, sick node drained to ${degradeFactor}`);
            results.push(
              ...(await runFleetBench({ ...opts, headroomBytes, degradeFactor }, env, log)),
            );
          }
        }
      } finally {
        if (own) await stopInstance(own, quiet, env).catch(() => undefined);
      }
      const outDir = flags.out ?? defaultResultsDir();
      const file = writeResult(outDir, 'fleet-bench.json', 'fleet-bench', {
        command: `sluice ${process.argv.slice(2).join(' ')}`,
        options: { ...opts, headroomMib: flags.headroomMib, degradeFactors: flags.degradeFactor },
        note: 'relays, feeds, gateways, writers and Valkey share this machine',
        results,
      });
      const table = formatFleetTable(results);
      writeFileSync(path.join(outDir, 'fleet-bench.md'), table + '\n');
      console.log(table);
      console.log(`\nresults: ${file}`);
    });
}
