import { Option } from 'commander';
import type { Command } from 'commander';
import { AT_LIMIT_AUTHORS, HEAVY_WORK_ITERATIONS, WORKLOADS } from '../bench/run/config.js';
import type { NostrIdentity, RelayImpl, ThirdPartyImpl, Workload } from '../bench/run/config.js';
import {
  NOSTR_IDENTITIES,
  THIRD_PARTY_IMPLS,
  isWsFloor,
  runsGateway,
} from '../bench/run/config.js';
import { positiveInt, positiveNumber, relayImplOption, share } from './flags.js';
import { checkPinning, parseCpuList } from '../harness/pinning.js';

interface RunFlags {
  implementation: string;
  workload: string;
  connections: number;
  duration: number;
  warmup: number;
  run: number;
  runs: number;
  keys: number;
  distribution: 'uniform' | 'zipf';
  zipfExponent: number;
  floodShare: number;
  quotaPoints?: number;
  quotaWindowSec: number;
  inMemoryBlock: boolean;
  ranges?: boolean;
  ipv6Clients?: boolean;
  maxTrackedClients?: number;
  workIterations: number;
  seed: number;
  valkey: string;
  relay?: string;
  relayImpl: string;
  nostrIdentity?: NostrIdentity;
  workers: number | 'auto';
  cpus?: number[];
  loadCpus?: number[];
  rate?: number;
  freshEventsPerSec: number;
  authors?: number;
  out?: string;
  outDir?: string;
}

/**
 * The write quota of HTTP workloads, per identity per window: 100 writes/s over a minute, as
 * quotas are usually set (per minute), so a window sees many writes of one identity.
 */
export const DEFAULT_QUOTA_POINTS = 6000;
export const DEFAULT_QUOTA_WINDOW_SEC = 60;
/**
 * The Nostr workload measures throughput (through the gateway / relay alone): its quota is
 * far above what 2 cores can send from one address, so nothing is refused; a refusal fails
 * the run.
 */
export const NOSTR_QUOTA_POINTS = 1_000_000;
/** Fresh Nostr events signed per second of warm-up + window: above what this machine sends. */
export const FRESH_EVENTS_PER_SEC = 8000;
/** Distinct authors of the fresh events. */
export const FRESH_EVENT_AUTHORS = 1000;

export function registerBenchRun(bench: Command): void {
  bench
    .command('run')
    .description(
      'one measured run of one configuration (what run-benchmark.sh and run-all.sh call): ' +
        'starts the relay unless --relay is given, and the gateway or peer under test',
    )
    .requiredOption(
      '--implementation <name>',
      'valkey-glide | iovalkey | ioredis (each optionally +lease) | quotas-off | fastify-rate-limit, ' +
        'optionally :cluster; ' +
        'or relay-alone (the load straight to the relay, no gateway) or a bare proxy ' +
        '(ws-floor, ws-floor-pooled, ws-floor-frames, ws-floor-tcp): Nostr only',
    )
    .addOption(
      new Option(
        '--workload <name>',
        'what the load writes (a Nostr variant names whom the gateway charges: --nostr-identity)',
      )
        .choices(WORKLOADS)
        .default('light'),
    )
    .option(
      '--connections <n>',
      'concurrent connections (adaptive: fixed at 4 writers)',
      positiveInt,
      50,
    )
    .option('--duration <s>', 'seconds measured', positiveInt, 10)
    .option('--warmup <s>', 'seconds of unrecorded load first', (v) => Number(v), 3)
    .option('--run <n>', 'index of this run (names the file)', positiveInt, 1)
    .option('--runs <n>', 'runs of this configuration in the session (recorded)', positiveInt, 1)
    .option('--keys <n>', 'distinct client identities in the load', positiveInt, 10_000)
    .addOption(
      new Option('--distribution <d>', 'how requests pick identities')
        .choices(['uniform', 'zipf'])
        .default('uniform'),
    )
    .option('--zipf-exponent <s>', 'Zipf exponent', positiveNumber, 1.1)
    .option('--flood-share <x>', 'flood: share of identities far over their limit', share, 0.9)
    .option(
      '--quota-points <n>',
      `write quota per identity per window (default ${DEFAULT_QUOTA_POINTS}; nostr: ${NOSTR_QUOTA_POINTS}, never reached)`,
      positiveInt,
    )
    .option('--quota-window-sec <s>', 'quota window', positiveInt, DEFAULT_QUOTA_WINDOW_SEC)
    .option('--no-in-memory-block', 'consult Valkey even for clients known to be over limit')
    .option(
      '--ranges',
      'quotas.ranges on, each range 256 clients wide in limit (so none refuses): what charging ' +
        'each write\'s ranges costs (docs/BENCHMARKS.md, "Address ranges")',
    )
    .option(
      '--ipv6-clients',
      'the clients are IPv6, a /64 each, 256 to a /56 (with --ranges: two ranges a write)',
    )
    .option(
      '--max-tracked-clients <n>',
      "the gateway's limits.maxTrackedClients (default: the gateway's own): what each " +
        'per-client structure holds',
      positiveInt,
    )
    .option(
      '--work-iterations <n>',
      `relay CPU work per write (default: ${HEAVY_WORK_ITERATIONS} for heavy, else 0)`,
      (v) => Number(v),
    )
    .option('--seed <n>', 'seed of the event pool and the key draw', positiveInt, 1)
    .requiredOption('--valkey <host:port>', 'any node of the Valkey the run uses')
    .option('--relay <url>', 'a running reference relay (else one is started)')
    .addOption(
      relayImplOption(
        'the relay: the reference one, nostr-rs-relay (built from crates.io with cargo) or ' +
          'khatru (a khatru relay built from Go modules with go), each on first use and ' +
          'cached; Nostr workload only',
        'reference',
      ),
    )
    .option(
      '--fresh-events-per-sec <n>',
      'nostr: new events pre-signed per second of warm-up + window (a run that sends more fails)',
      positiveInt,
      FRESH_EVENTS_PER_SEC,
    )
    .option(
      '--authors <n>',
      `nostr: distinct keys signing the events (default ${FRESH_EVENT_AUTHORS}; nostr-at-limit ${AT_LIMIT_AUTHORS}; nostr-long-tail: one per event, always)`,
      positiveInt,
    )
    .addOption(
      new Option(
        '--nostr-identity <who>',
        'nostr: pubkey (authors charged, as configured by default), gateway-verified (every ' +
          "signature verified first, nostr.verify always), relay-verified (authors charged on the relay's OK, " +
          'nostr.verify relay), ip (the sender only: no verification) or pubkey-at-limit (as pubkey, ' +
          'every author sending past a quota of 10); default: as --workload names it (nostr: pubkey)',
      ).choices([...NOSTR_IDENTITIES]),
    )
    .option(
      '--workers <n>',
      'gateway processes sharing the port (node:cluster): a count, or auto (one per core it may ' +
        'use, as the gateway ships; with --cpus, the cores of that list)',
      (v: string) => (v === 'auto' ? ('auto' as const) : positiveInt(v)),
      1,
    )
    .option(
      '--cpus <list>',
      'single box: pin the relay, the gateway (every worker) and the Valkey nodes the run ' +
        'uses to these cores with taskset, e.g. 0,1 (Valkey gets its cores back after the run)',
      parseCpuList,
    )
    .option(
      '--load-cpus <list>',
      'pin the load generator (this process, every thread) to these cores; default: not pinned',
      parseCpuList,
    )
    .option(
      '--rate <n>',
      'HTTP: offer this many requests per second (open loop, latency from each intended send ' +
        'time; --connections bounds those in flight) instead of the closed loop',
      positiveInt,
    )
    .option('--out <file>', 'result file (default: <out-dir>/<standard name>)')
    .option('--out-dir <dir>', 'results directory (default results/<timestamp>)')
    .action(async (flags: RunFlags) => {
      const { parseTarget, clientOf, runFileName, workloadSpec } =
        await import('../bench/run/config.js');
      const { parseNodeAddress } = await import('../store/options.js');
      const target = parseTarget(flags.implementation);
      const named = flags.workload as Workload;
      const spec = workloadSpec(named);
      const workload = spec.load;
      const adaptive = spec.law !== undefined;
      if (adaptive && target.implementation === 'quotas-off') {
        throw new Error('the adaptive workload needs quotas: pick a Valkey client');
      }
      if (
        target.implementation === 'fastify-rate-limit' &&
        !(spec.baselines as readonly string[]).includes('fastify-rate-limit')
      ) {
        throw new Error(
          `the peer baseline runs the light and heavy workloads only (it has no tiers and no WebSocket), not ${named}`,
        );
      }
      if (flags.rate && (spec.transport !== 'http' || adaptive)) {
        throw new Error(
          `--rate (open loop) drives the HTTP workloads only, not ${named} (its connections wait for each answer)`,
        );
      }
      const relayImpl = flags.relayImpl as RelayImpl;
      if (relayImpl !== 'reference' && spec.transport !== 'websocket') {
        throw new Error(
          `${relayImpl} only speaks Nostr (WebSocket): the ${named} workload needs the reference relay (--relay-impl reference)`,
        );
      }
      if (relayImpl !== 'reference' && flags.relay) {
        throw new Error(`--relay names a running reference relay; ${relayImpl} is started per run`);
      }
      const speaksNostr = spec.transport === 'websocket';
      if (target.implementation === 'relay-alone' && !speaksNostr) {
        throw new Error(
          `relay-alone measures the Nostr relay by itself: use --workload nostr, not ${named}`,
        );
      }
      if (isWsFloor(target.implementation) && !speaksNostr) {
        throw new Error(
          `${target.implementation} proxies WebSocket only: use a Nostr workload, not ${named}`,
        );
      }
      if (flags.nostrIdentity && spec.nostrIdentity && named !== 'nostr') {
        throw new Error(`--workload ${named} already names whom the gateway charges`);
      }
      if (flags.nostrIdentity === 'pubkey-long-tail' && !spec.longTail) {
        throw new Error('--nostr-identity pubkey-long-tail: use --workload nostr-long-tail');
      }
      if (spec.longTail && flags.authors !== undefined) {
        throw new Error(
          `--workload ${named} signs every event with a key of its own: --authors does not apply`,
        );
      }
      if (flags.cpus) checkPinning(flags.cpus);
      if (flags.loadCpus) checkPinning(flags.loadCpus, '--load-cpus');
      const nostr = workload === 'nostr';
      const { longTailAuthors } = await import('../bench/run/fresh-budget.js');
      const warmupSec = adaptive ? 0 : flags.warmup;
      const cfg = {
        implementation: target.implementation,
        client: clientOf(target.implementation),
        mode: target.mode,
        workload,
        transport: spec.transport,
        connections: adaptive ? 4 : flags.connections,
        durationSec: flags.duration,
        warmupSec,
        run: flags.run,
        runs: flags.runs,
        keys: flags.keys,
        distribution: flags.distribution,
        zipfExponent: flags.distribution === 'zipf' ? flags.zipfExponent : null,
        floodShare: workload === 'flood' ? flags.floodShare : null,
        quota: {
          points: flags.quotaPoints ?? (nostr ? NOSTR_QUOTA_POINTS : DEFAULT_QUOTA_POINTS),
          windowSec: flags.quotaWindowSec,
        },
        inMemoryBlock: flags.inMemoryBlock,
        ...(flags.ranges ? { ranges: true } : {}),
        ...(flags.ipv6Clients ? { ipv6Clients: true } : {}),
        ...(flags.maxTrackedClients ? { maxTrackedClients: flags.maxTrackedClients } : {}),
        relayWorkIterations: flags.workIterations ?? spec.relayWorkIterations,
        law: spec.law ?? null,
        seed: flags.seed,
        relayImpl,
        freshEvents: nostr
          ? {
              maxPerSec: flags.freshEventsPerSec,
              authors: spec.longTail
                ? longTailAuthors({
                    warmupSec,
                    durationSec: flags.duration,
                    connections: flags.connections,
                    maxPerSec: flags.freshEventsPerSec,
                  })
                : (flags.authors ?? (spec.atLimit ? AT_LIMIT_AUTHORS : FRESH_EVENT_AUTHORS)),
            }
          : null,
        nostrIdentity: nostr ? (flags.nostrIdentity ?? spec.nostrIdentity) : undefined,
        // The relay alone and the peer run no sluice gateway: --workers (run-all.sh gives it to
        // every run) is not theirs, and their names and baselines stay those of one process.
        workers: runsGateway(target.implementation) ? flags.workers : 1,
        cpus: flags.cpus ?? null,
        loadCpus: flags.loadCpus ?? null,
        rate: flags.rate ?? null,
      };
      const path = await import('node:path');
      const { defaultResultsDir } = await import('../bench/results.js');
      const file = flags.out ?? path.join(flags.outDir ?? defaultResultsDir(), runFileName(cfg));
      const targets = {
        valkey: parseNodeAddress(flags.valkey),
        ...(flags.relay ? { relayUrl: flags.relay } : {}),
      };
      const log = (line: string) => console.error(line);
      const result = adaptive
        ? await (await import('../bench/run/adaptive-run.js')).runAdaptive(cfg, targets, log)
        : await (await import('../bench/run/runner.js')).runOnce(cfg, targets, log);
      const { writeRunFile } = await import('../bench/run/result-schema.js');
      writeRunFile(file, result);
      const { formatRunLine } = await import('../bench/run/summary-line.js');
      console.log(formatRunLine(result, file));
      // 2: the run finished but cannot be used (its file says why); 1 is left for errors.
      if (result.status !== 'ok') process.exitCode = 2;
    });
}

/** `sluice bench relay-install`: build a third-party relay into its cache (run-all.sh). */
export function registerRelayInstall(bench: Command): void {
  bench
    .command('relay-install')
    .description(
      'build a third-party relay into the cache, unless it is there: nostr-rs-relay (pinned, ' +
        'from crates.io) or khatru (relays/khatru, from Go modules); prints the binary',
    )
    .addOption(
      new Option('--relay-impl <name>', 'the relay to build')
        .choices(THIRD_PARTY_IMPLS)
        .default('nostr-rs-relay'),
    )
    .option('--print-command', 'only print the commands that build it')
    .option('--print-path', 'only print where the binary is (or will be)')
    .action(async (flags: { relayImpl: string; printCommand?: boolean; printPath?: boolean }) => {
      const { thirdPartyRelay } = await import('../bench/run/third-party-relays.js');
      const kind = thirdPartyRelay(flags.relayImpl as ThirdPartyImpl);
      if (flags.printCommand) {
        console.log(kind.buildCommand());
        return;
      }
      if (flags.printPath) {
        console.log(kind.binary());
        return;
      }
      console.log(await kind.ensure((line) => console.error(line)));
    });
}
