import { Option } from 'commander';
import type { Command } from 'commander';
import { FLOOD_SHAPES, PROBE_WORKLOADS } from '../bench/oom/names.js';
import { ARMS } from '../bench/run/config.js';
import type { Law, RelayImpl } from '../bench/run/config.js';
import type { ProbeWorkload } from '../bench/oom/names.js';
import type { ClientKind, Topology } from '../store/options.js';
import type { OomBenchOptions } from '../bench/oom/oom-bench.js';
import {
  listOf,
  parseBytes,
  positiveInt,
  positiveNumber,
  relayImplOption,
  valkeyClientOption,
  valkeyModeOption,
} from './flags.js';

/**
 * nostr-rs-relay has no drain to set: its working set rises with the bytes written and falls
 * back about every 30 s (oom-probe); at 1.5 MiB/s of 32 KiB events its peaks sit at about
 * idle + 64 MiB, the target.
 */
const NOSTR_RS_RELAY_SUSTAINABLE_BYTES = 1.5 * 1024 * 1024;
const NOSTR_RS_RELAY_SUSTAINABLE_TEXT = '1.5 MiB/s';

/** The sustainable rate when --sustainable is not given: measured for two relays only. */
function sustainableDefault(relayImpl: RelayImpl, drain: number): number {
  if (relayImpl === 'reference') return drain;
  if (relayImpl === 'nostr-rs-relay') return NOSTR_RS_RELAY_SUSTAINABLE_BYTES;
  throw new Error(
    `${relayImpl} has no measured sustainable rate: give --sustainable (bench oom-probe ` +
      `--relay-impl ${relayImpl} shows how its memory follows the load)`,
  );
}

/** The flags: the options that keep their names, and those given in other units. */
type OomFlags = Pick<
  OomBenchOptions,
  | 'overload'
  | 'identities'
  | 'gateways'
  | 'writeBudget'
  | 'learnBudget'
  | 'learnFromDrain'
  | 'feedSource'
  | 'slowReaders'
  | 'slowReadersVia'
  | 'cgroupParent'
  | 'seed'
> & {
  valkey: string;
  valkeyClient: ClientKind;
  valkeyMode: Topology;
  relayImpl: string;
  arms: string[];
  floods: string[];
  duration: number;
  calm: number;
  drain: number;
  sustainable?: number;
  eventBytes: number;
  limitHeadroom: number;
  targetHeadroom: number;
  outDir?: string;
};

/** `sluice bench oom`: the relay in a memory cgroup with a hard limit, under write floods. */
export function registerOomBench(bench: Command): void {
  bench
    .command('oom')
    .description(
      'the relay inside a memory cgroup this creates with a hard limit (idle + 96 MiB; the ' +
        "feed's target idle + 64 MiB), a flood at 3 x its drain for each arm (no adaptation, " +
        'the reference PID, the lead law) and flood (one heavy writer, a spam wave of many ' +
        'identities): OOM kills, acknowledged events lost, peak memory, accepted writes. ' +
        'Needs a writable memory cgroup (root): says why and exits 1 where there is none',
    )
    .requiredOption('--valkey <host:port>', 'the Valkey the feed and gateways use')
    .addOption(valkeyClientOption())
    .addOption(valkeyModeOption())
    .addOption(relayImplOption('the relay under test', 'reference'))
    .option('--arms <list>', ARMS.join(', '), listOf(ARMS, '--arms'), [...ARMS])
    .option('--floods <list>', FLOOD_SHAPES.join(', '), listOf(FLOOD_SHAPES, '--floods'), [
      ...FLOOD_SHAPES,
    ])
    .option('--duration <s>', 'seconds of flood per arm', positiveInt, 80)
    .option('--calm <s>', 'seconds at half the sustainable rate first', positiveInt, 10)
    .option('--drain <bytes>', "the reference relay's drain per second", parseBytes, 1024 * 1024)
    .option(
      '--sustainable <bytes>',
      'event bytes per second the relay takes while at its target (default: the drain for the ' +
        `reference relay; ${NOSTR_RS_RELAY_SUSTAINABLE_TEXT} for nostr-rs-relay, from oom-probe; ` +
        'required for khatru)',
      parseBytes,
    )
    .option('--event-bytes <bytes>', 'content bytes of each event', parseBytes, 32 * 1024)
    .option(
      '--limit-headroom <bytes>',
      'hard limit above the idle working set',
      parseBytes,
      96 * 1024 * 1024,
    )
    .option(
      '--target-headroom <bytes>',
      "the feed's target above the idle working set",
      parseBytes,
      64 * 1024 * 1024,
    )
    .option('--overload <x>', 'the flood as a multiple of the sustainable rate', positiveNumber, 3)
    .option('--identities <n>', 'identities of the spam wave', positiveInt, 1000)
    .option('--gateways <n>', 'gateways in front of the relay', positiveInt, 2)
    .option(
      '--write-budget',
      "give the gateways the node's write budget (upstreams[].writeBudget: sustainable " +
        'events/s) in adaptive arms; by default they have none and apply what the feed learns',
      false,
    )
    .option(
      '--no-learn-from-drain',
      "the reference relay's feed learns from memory and admitted bytes, not the relay's drain",
    )
    .option(
      '--no-learn-budget',
      'the feed learns no write budget (with no --write-budget: the per-client caps alone)',
    )
    .addOption(
      new Option(
        '--feed-source <what>',
        "what the feed samples: the group (cgroup), or the reference relay's own RssAnon (relay)",
      )
        .choices(['cgroup', 'relay'])
        .default('cgroup'),
    )
    .option(
      '--slow-readers <n>',
      'also this many subscribers to every new event that never read (they reconnect when closed)',
      (v: string) => (v === '0' ? 0 : positiveInt(v)),
      0,
    )
    .addOption(
      new Option('--slow-readers-via <where>', 'where the slow readers connect')
        .choices(['relay', 'gateway'])
        .default('relay'),
    )
    .option(
      '--cgroup-parent <dir>',
      "where the groups are made (default: this process's own memory cgroup)",
    )
    .option('--seed <n>', "seed of the writers' keys", positiveInt, 1)
    .option('--out-dir <dir>', 'results directory (default results/<timestamp>)')
    .action(async (flags: OomFlags) => {
      const relayImpl = flags.relayImpl as RelayImpl;
      if (relayImpl !== 'reference' && flags.feedSource === 'relay') {
        throw new Error("--feed-source relay reads the reference relay's metrics: use cgroup");
      }
      const { CgroupUnavailableError } = await import('../bench/oom/cgroup.js');
      const { runOomBench } = await import('../bench/oom/oom-bench.js');
      const { defaultResultsDir } = await import('../bench/results.js');
      const { parseNodeAddress } = await import('../store/options.js');
      const node = parseNodeAddress(flags.valkey);
      const controller = new AbortController();
      // A signal stops the flood; every arm's finally then removes its group and processes.
      for (const sig of ['SIGINT', 'SIGTERM'] as const) {
        process.once(sig, () => {
          console.error(`${sig}: stopping, removing the memory cgroup`);
          process.exitCode = sig === 'SIGINT' ? 130 : 143;
          controller.abort();
        });
      }
      try {
        const out = await runOomBench(
          {
            relayImpl,
            variants: flags.arms as Law[],
            floods: flags.floods as ('heavy' | 'spam')[],
            valkey: {
              client: flags.valkeyClient,
              mode: flags.valkeyMode,
              nodes: [`${node.host}:${node.port}`],
            },
            cgroupParent: flags.cgroupParent,
            drainBytesPerSec: flags.drain,
            sustainableBytesPerSec: flags.sustainable ?? sustainableDefault(relayImpl, flags.drain),
            contentBytes: flags.eventBytes,
            limitHeadroomBytes: flags.limitHeadroom,
            targetHeadroomBytes: flags.targetHeadroom,
            overload: flags.overload,
            calmSec: flags.calm,
            floodSec: flags.duration,
            identities: flags.identities,
            gateways: flags.gateways,
            writeBudget: flags.writeBudget,
            learnBudget: flags.learnBudget,
            learnFromDrain: flags.learnFromDrain,
            feedSource: flags.feedSource,
            slowReaders: flags.slowReaders,
            slowReadersVia: flags.slowReadersVia,
            seed: flags.seed,
            outDir: flags.outDir ?? defaultResultsDir(),
            command: `sluice ${process.argv.slice(2).join(' ')}`,
          },
          (line) => console.error(line),
          controller.signal,
        );
        console.log(out.table);
        console.log(`\nresults: ${out.jsonFile}\n         ${out.mdFile}`);
      } catch (err) {
        if (err instanceof CgroupUnavailableError) {
          console.error(`sluice bench oom: cannot run without a memory cgroup: ${err.message}`);
          process.exitCode = 1;
          return;
        }
        // Stopped by a signal: the groups and processes are gone (each arm's finally).
        if (controller.signal.aborted) return;
        throw err;
      }
    });
}

interface ProbeFlags {
  relayImpl: string;
  workloads: string[];
  seconds: number;
  quiet: number;
  slowReaders: number;
  rate?: number;
  drain: number;
  cgroupParent?: string;
  outDir?: string;
}

/** `sluice bench oom-probe`: what moves a relay's memory at all, before any arm is run. */
export function registerOomProbe(bench: Command): void {
  bench
    .command('oom-probe')
    .description(
      "whether a relay's memory (its cgroup's usage less inactive file pages) responds to " +
        'write load, and to what: many small events, large events, large events fanned out ' +
        'to subscribers that never read; each on a fresh relay in a fresh group with no limit',
    )
    .addOption(relayImplOption('the relay', 'nostr-rs-relay'))
    .option(
      '--workloads <list>',
      PROBE_WORKLOADS.join(', '),
      listOf(PROBE_WORKLOADS, '--workloads'),
      [...PROBE_WORKLOADS],
    )
    .option('--seconds <s>', 'seconds of load per workload', positiveInt, 30)
    .option('--quiet <s>', 'seconds without load before the last reading', positiveInt, 10)
    .option('--slow-readers <n>', 'subscribers that never read', positiveInt, 20)
    .option('--rate <n>', "offered EVENTs per second (default: each workload's own)", positiveInt)
    .option('--drain <bytes>', "the reference relay's drain per second", parseBytes, 1024 * 1024)
    .option('--cgroup-parent <dir>', "where the groups are made (default: this process's own)")
    .option('--out-dir <dir>', 'results directory (default results/<timestamp>)')
    .action(async (flags: ProbeFlags) => {
      const { CgroupUnavailableError } = await import('../bench/oom/cgroup.js');
      const probe = await import('../bench/oom/probe.js');
      const { checkCgroup, relayFactory } = await import('../bench/oom/oom-bench.js');
      const { showResult } = await import('../bench/results.js');
      const log = (line: string) => console.error(line);
      try {
        await checkCgroup(flags.cgroupParent);
      } catch (err) {
        if (err instanceof CgroupUnavailableError) {
          console.error(
            `sluice bench oom-probe: cannot run without a memory cgroup: ${err.message}`,
          );
          process.exitCode = 1;
          return;
        }
        throw err;
      }
      const relayImpl = flags.relayImpl as RelayImpl;
      const makeRelay = relayFactory(relayImpl, flags.drain, 512 * 1024, log);
      const results = [];
      for (const w of flags.workloads as ProbeWorkload[]) {
        results.push(
          await probe.runProbe(w, {
            makeRelay,
            seconds: flags.seconds,
            quietSec: flags.quiet,
            slowReaders: flags.slowReaders,
            rate: flags.rate,
            cgroupParent: flags.cgroupParent,
            log,
          }),
        );
      }
      const table = probe.probeTable(relayImpl, results, flags.quiet);
      const command = `sluice ${process.argv.slice(2).join(' ')}`;
      showResult(
        flags.outDir,
        'oom-probe',
        { command, relayImpl, results },
        table,
        `oom-probe-${relayImpl}.json`,
      );
    });
}
