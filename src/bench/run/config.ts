/** One benchmark run's configuration, the workloads it can run, and its result file's name. */
import { CLIENT_KINDS } from '../../store/options.js';
import type { ClientKind, Topology } from '../../store/options.js';
import type { KeyDistribution } from './keys.js';
import { LAWS, LAW_NAMES } from '../../pressure/laws/registry.js';

/** The same clients with quota leases (quotas.lease): points spent locally, taken in leases. */
export const LEASED_CLIENTS = CLIENT_KINDS.map((c) => `${c}+lease` as const);

/** The baselines measured beside the clients (see WORKLOAD_SPECS for where each runs). */
export const BASELINES = [
  'quotas-off',
  'fastify-rate-limit',
  // The load straight to the relay: no front end, no Valkey client (the Nostr baseline).
  'relay-alone',
  // A bare Node ws proxy before the relay, passing every message on (bench/ws-floor.ts):
  // what any per-connection Node proxy costs, the floor under the gateway's quotas off.
  'ws-floor',
  // The same, but every client's EVENT goes to the relay over one shared connection (a pool),
  // its OK back to the client that sent it: what multiplexing the relay side would save.
  'ws-floor-pooled',
  // No WebSocket library: bytes passed on, each client frame found and unmasked (frames), or
  // a TCP pipe that reads nothing (tcp): what no Node proxy goes under.
  'ws-floor-frames',
  'ws-floor-tcp',
] as const;
export type Baseline = (typeof BASELINES)[number];

/** The bare proxies among the baselines, named `ws-floor` or `ws-floor-<shape>`. */
type WsFloor = Extract<Baseline, `ws-floor${string}`>;

/** The bare proxies (bench/ws-floor.ts): no gateway, no Valkey, WebSocket only. */
export function isWsFloor(impl: Implementation): impl is WsFloor {
  return impl === 'ws-floor' || impl.startsWith('ws-floor-');
}

/** How each bare proxy passes messages on (bench/ws-floor.ts says what each does). */
export const FLOOR_SHAPES = ['ws', 'pooled', 'frames', 'tcp'] as const;
export type FloorShape = (typeof FLOOR_SHAPES)[number];

/** The shape of a bare proxy (`ws-floor` is the ws library's, `ws-floor-tcp` is `tcp`). */
export function floorShape(impl: WsFloor): FloorShape {
  return impl === 'ws-floor' ? 'ws' : (impl.slice('ws-floor-'.length) as FloorShape);
}

/** Whether a sluice gateway serves the load (not the relay alone, the peer or a ws floor). */
export function runsGateway(impl: Implementation): boolean {
  return impl !== 'relay-alone' && impl !== 'fastify-rate-limit' && !isWsFloor(impl);
}

export const IMPLEMENTATIONS = [...CLIENT_KINDS, ...LEASED_CLIENTS, ...BASELINES] as const;
export type Implementation = (typeof IMPLEMENTATIONS)[number];

/**
 * The relay behind the front end: ours, or one that users run (nostr-rs-relay built from
 * crates.io, a khatru relay from Go modules).
 */
export const RELAY_IMPLS = ['reference', 'nostr-rs-relay', 'khatru'] as const;
export type RelayImpl = (typeof RELAY_IMPLS)[number];
/** The relays started and stopped per run (built into a cache on first use). */
export type ThirdPartyImpl = Exclude<RelayImpl, 'reference'>;
export const THIRD_PARTY_IMPLS = RELAY_IMPLS.filter((r): r is ThirdPartyImpl => r !== 'reference');

/** Heavy writes cost the relay this many sha256 rounds each (~1 ms of one core here). */
export const HEAVY_WORK_ITERATIONS = 500;

type Identity = 'apiKey' | 'ip' | 'pubkey';
/**
 * Whom a Nostr run charges besides the sender, and how: `pubkey`, the author, as by default
 * (nostr.verify auto); `gateway-verified`, the author after the gateway verified every event
 * (nostr.verify always); `relay-verified`, the author on the relay's OK (nostr.verify relay);
 * `ip`, the sender only; `pubkey-at-limit`, as `pubkey`, with every author sending past its
 * quota (AT_LIMIT) and the run checking that none was admitted past it; `pubkey-long-tail`,
 * as `pubkey`, with every event signed by an author of its own (a public relay's long tail:
 * no author is ever known to the gateway in its window).
 */
export const NOSTR_IDENTITIES = [
  'pubkey',
  'gateway-verified',
  'relay-verified',
  'ip',
  'pubkey-at-limit',
  'pubkey-long-tail',
] as const;
export type NostrIdentity = (typeof NOSTR_IDENTITIES)[number];
/** The adaptive benchmark's arms: no adaptation, then each control law of the registry. */
export const ARMS = ['none', ...LAW_NAMES] as const;
export type Law = (typeof ARMS)[number];
/** Each arm's name in the report (the run file's schema carries them). */
export const ARM_LABELS: Record<Law, string> = {
  none: 'no adaptation',
  ...Object.fromEntries(LAW_NAMES.map((law) => [law, LAWS[law].label])),
} as Record<Law, string>;

/** What a session knows of a workload: how its load travels, where it runs, what it charges. */
export interface WorkloadSpec {
  /** What the load writes (the run file's `config.workload`): itself, or the one it varies. */
  load: string;
  transport: 'http' | 'websocket';
  /**
   * The relay of a session it runs against: the shared light one (no work per write), the
   * shared heavy one, a fresh one per run (Nostr: every run starts from the same state) or
   * none of the session's (adaptive starts its own).
   */
  relay: 'light' | 'heavy' | 'per-run' | 'none';
  relayWorkIterations: number;
  /** The baselines that run it beside the clients, once per topology (--no-baselines drops them). */
  baselines: readonly ('quotas-off' | 'fastify-rate-limit')[];
  /** relay-alone runs it once per connection count (kept with --no-baselines: a denominator). */
  relayAlone?: true;
  /** Run through the first chosen client only (a variant, compared with the relay alone). */
  firstClientOnly?: true;
  /** Run once per session through the first chosen client (a time series, not a rate). */
  once?: true;
  /** `--workload` names it by this group too (nostr, adaptive). */
  group?: string;
  law?: Law;
  // The gateway's settings (gateway-config.ts reads them):
  /** Whom the gateway charges, in order. */
  identity: readonly Identity[];
  /** Nostr: config.nostrIdentity (whom the gateway charges besides the sender). */
  nostrIdentity?: NostrIdentity;
  /**
   * Nostr: who verifies signatures (`relay`: the author is charged on the relay's OK;
   * `always`: the gateway, every event, before the author is charged).
   */
  nostrVerify?: 'relay' | 'always';
  /** Tiers by API key: the flooders' keys get a quota of one write an hour. */
  floodTiers?: true;
  /**
   * Nostr: authors get AT_LIMIT's quota and the sender (one API key) --quota-points; the run
   * counts what each was admitted and fails past either limit (see admitted-past-limit.ts).
   */
  atLimit?: true;
  /**
   * Nostr: every event signed by a key of its own (one event per author, never re-used), as
   * a public relay's long tail of authors looks to a gateway (see LONG_TAIL in fresh-budget.ts).
   */
  longTail?: true;
  /**
   * Nostr: the load reads (a REQ for a page of READS.limit stored events, EOSE, CLOSE, again)
   * from a relay holding READS.stored events, stored before the run (see ws-read-load.ts).
   */
  reads?: true;
}

/**
 * What `nostr-reads` asks of a relay: pages of 50 kind-1 notes of about 300 bytes, from 2,000
 * stored. A client opening a feed asks for tens to hundreds of notes at a time.
 */
export const READS = { stored: 2000, limit: 50, contentBytes: 256 } as const;

/**
 * The author quota of `nostr-at-limit`: far fewer events than each author sends in a run (its
 * AT_LIMIT_AUTHORS authors send 100-200 each in 10 s at this machine's rates), in a window
 * longer than any run, so what an author is admitted over the run is what its one window
 * admitted.
 */
export const AT_LIMIT = { points: 10, windowSec: 3600 } as const;
/** How many keys sign the events of `nostr-at-limit` unless --authors says otherwise. */
export const AT_LIMIT_AUTHORS = 100;
/** The API key that sends every event of `nostr-at-limit` (its tier: --quota-points). */
export const AT_LIMIT_SENDER_KEY = 'bench-at-limit-sender';

const HTTP = { transport: 'http', relayWorkIterations: 0, identity: ['ip'] } as const;
const BOTH_BASELINES = ['quotas-off', 'fastify-rate-limit'] as const;
const NOSTR = {
  load: 'nostr',
  transport: 'websocket',
  relay: 'per-run',
  relayWorkIterations: 0,
  group: 'nostr',
} as const;
const adaptive = <L extends Law>(law: L) =>
  ({
    ...HTTP,
    load: `adaptive-${law}`,
    relay: 'none',
    baselines: [],
    once: true,
    group: 'adaptive',
    law,
  }) as const;
/** adaptive-<arm> for each arm: the closed loop under each law, and without one. */
const ADAPTIVE = Object.fromEntries(ARMS.map((law) => [`adaptive-${law}`, adaptive(law)])) as {
  [L in Law as `adaptive-${L}`]: ReturnType<typeof adaptive<L>>;
};

/**
 * Every workload by name, in the report's order: what `bench run --workload`, the plan
 * (`sluice bench plan`, which run-all.sh runs) and the report (through the run file's
 * schema) know. Adding a workload is an entry here and its load in runner.ts.
 */
export const WORKLOAD_SPECS = {
  light: { ...HTTP, load: 'light', relay: 'light', baselines: BOTH_BASELINES },
  heavy: {
    ...HTTP,
    load: 'heavy',
    relay: 'heavy',
    relayWorkIterations: HEAVY_WORK_ITERATIONS,
    baselines: BOTH_BASELINES,
  },
  flood: {
    ...HTTP,
    load: 'flood',
    relay: 'light',
    baselines: [],
    identity: ['apiKey', 'ip'],
    floodTiers: true,
  },
  // Nostr as configured by default: the author charged before forwarding, on the event's hash
  // while far from its limit, verified near it (nostr.verify auto).
  nostr: {
    ...NOSTR,
    baselines: ['quotas-off'],
    relayAlone: true,
    identity: ['pubkey', 'ip'],
    nostrIdentity: 'pubkey',
  },
  // The default configuration on a public relay's traffic: every event from a new author, so
  // no author is known to the gateway in its window (the repeat-writer `nostr` has 1,000
  // authors writing many events each). Compared with the relay alone on the same events.
  'nostr-long-tail': {
    ...NOSTR,
    baselines: ['quotas-off'],
    relayAlone: true,
    identity: ['pubkey', 'ip'],
    nostrIdentity: 'pubkey-long-tail',
    longTail: true,
  },
  // A public relay's main traffic: subscriptions. Each connection asks for pages of stored
  // notes, one REQ after another; reads are free by default, so one client runs it, compared
  // with the relay alone and with quotas off.
  'nostr-reads': {
    ...NOSTR,
    load: 'nostr-reads',
    baselines: ['quotas-off'],
    relayAlone: true,
    firstClientOnly: true,
    identity: ['pubkey', 'ip'],
    nostrIdentity: 'pubkey',
    reads: true,
  },
  // The gateway verifies every EVENT before charging its author (nostr.verify always: the
  // default before authors far from their limit were charged on the hash alone).
  'nostr-gateway-verified': {
    ...NOSTR,
    baselines: [],
    firstClientOnly: true,
    identity: ['pubkey', 'ip'],
    nostrIdentity: 'gateway-verified',
    nostrVerify: 'always',
  },
  // Authors charged when the relay accepts the event (nostr.verify relay), no verification.
  'nostr-relay-verified': {
    ...NOSTR,
    baselines: [],
    firstClientOnly: true,
    identity: ['pubkey', 'ip'],
    nostrIdentity: 'relay-verified',
    nostrVerify: 'relay',
  },
  // The sender only, no verification (nostr.verify auto).
  'nostr-sender-only': {
    ...NOSTR,
    baselines: [],
    firstClientOnly: true,
    identity: ['ip'],
    nostrIdentity: 'ip',
  },
  // The default configuration with every author past its quota, through every client: the
  // run fails if any author, or the sender, was admitted past its limit.
  'nostr-at-limit': {
    ...NOSTR,
    baselines: [],
    identity: ['apiKey', 'pubkey', 'ip'],
    nostrIdentity: 'pubkey-at-limit',
    atLimit: true,
  },
  ...ADAPTIVE,
} as const satisfies Record<string, WorkloadSpec>;

/** A workload by name (variants included): what the plan and `bench run --workload` take. */
export type Workload = keyof typeof WORKLOAD_SPECS;
export const WORKLOADS = Object.keys(WORKLOAD_SPECS) as [Workload, ...Workload[]];
/** What a load writes: the run file's `config.workload` (a variant is recorded as its load). */
export type Load = (typeof WORKLOAD_SPECS)[Workload]['load'];
export const LOADS = [...new Set(WORKLOADS.map((w) => WORKLOAD_SPECS[w].load))] as [
  Load,
  ...Load[],
];

export function workloadSpec(name: Workload): WorkloadSpec & { load: Load } {
  return WORKLOAD_SPECS[name];
}

/** A run's workload by name: its load, or the variant its nostrIdentity picks. */
export function workloadOf(c: Pick<RunConfig, 'workload' | 'nostrIdentity'>): Workload {
  const identity = c.nostrIdentity ?? 'pubkey';
  const found = WORKLOADS.find((w) => {
    const spec: WorkloadSpec = WORKLOAD_SPECS[w];
    return spec.load === c.workload && (spec.nostrIdentity ?? 'pubkey') === identity;
  });
  if (!found) throw new Error(`no workload is ${c.workload} with nostrIdentity ${identity}`);
  return found;
}

export interface RunConfig {
  implementation: Implementation;
  /** The Valkey client: the implementation's, ioredis for the peer, null with quotas off. */
  client: ClientKind | null;
  mode: Topology;
  /** What the load writes; a Nostr variant is told apart by nostrIdentity. */
  workload: Load;
  transport: 'http' | 'websocket';
  connections: number;
  durationSec: number;
  warmupSec: number;
  run: number;
  runs: number;
  keys: number;
  distribution: KeyDistribution;
  zipfExponent: number | null;
  floodShare: number | null;
  quota: { points: number; windowSec: number };
  inMemoryBlock: boolean;
  /** quotas.ranges on (limits that refuse nothing): the cost of charging ranges. Absent: off. */
  ranges?: boolean;
  /** The load's clients are IPv6 addresses, a /64 each (keys.ts clientAddressV6). Absent: IPv4. */
  ipv6Clients?: boolean;
  /** limits.maxTrackedClients of the gateway; absent: its default. */
  maxTrackedClients?: number;
  relayWorkIterations: number;
  law: Law | null;
  seed: number;
  /** Which relay the run measures; absent in files from before it could be chosen. */
  relayImpl?: RelayImpl;
  /**
   * Nostr: every EVENT is new to the relay and the gateway, pre-signed before the warm-up for
   * up to `maxPerSec` over warm-up + window, by `authors` distinct keys. null: the 500-event
   * pool, re-sent (HTTP workloads).
   */
  freshEvents?: { maxPerSec: number; authors: number } | null;
  /**
   * Nostr: who the gateway charges besides the sender. `pubkey` (the default configuration's
   * order): every EVENT's signature verified, the author charged, replays answered as
   * duplicates. `relay-verified`: the author charged when the relay accepts the event
   * (nostr.verify relay), no verification at the gateway. `ip`: the sender only, no
   * verification (nostr.verify auto). Absent: pubkey.
   */
  nostrIdentity?: NostrIdentity;
  /**
   * Gateway processes (node:cluster workers) as asked for: a count, or `auto` (one per core
   * the gateway may use: with --cpus, the cores of that list); absent: 1. The processes that
   * ran are the result's `gatewayWorkers`.
   */
  workers?: number | 'auto';
  /**
   * Single box: the cores the relay, the gateway (every worker) and the run's Valkey nodes were
   * pinned to (taskset), as a list of CPU numbers; absent or null: not pinned.
   */
  cpus?: number[] | null;
  /** The cores the load generator (this process, every thread) was pinned to; null: not pinned. */
  loadCpus?: number[] | null;
  /** HTTP: a fixed offered rate (open loop, latency from intended send times); absent: closed. */
  rate?: number | null;
}

/**
 * `{implementation}_{mode}_{workload}_{connections}c_{duration}s_run{N}.json` (no ':'), with
 * `_{relayImpl}` after the workload when the relay is not the reference one; the workload is
 * its name in WORKLOAD_SPECS (a Nostr variant: `nostr-sender-only`, `nostr-relay-verified`).
 */
export function runFileName(c: RunConfig): string {
  const relay = c.relayImpl && c.relayImpl !== 'reference' ? `_${c.relayImpl}` : '';
  const workload = c.rate ? `${workloadOf(c)}-rate${c.rate}` : workloadOf(c);
  const workers =
    c.workers === 'auto' ? '-auto' : c.workers && c.workers > 1 ? `-${c.workers}w` : '';
  const name = `${c.implementation}${workers}_${c.mode}_${workload}${relay}_${c.connections}c_${c.durationSec}s_run${c.run}.json`;
  if (/[:/\\]/.test(name)) throw new Error(`unsafe result file name: ${name}`);
  return name;
}

/** "valkey-glide:cluster" → implementation and topology; a bare name means standalone. */
export function parseTarget(text: string): { implementation: Implementation; mode: Topology } {
  const [impl, mode = 'standalone', extra] = text.trim().split(':');
  if (extra !== undefined || !(IMPLEMENTATIONS as readonly string[]).includes(impl!)) {
    throw new Error(
      `unknown implementation "${text}": expected one of ${IMPLEMENTATIONS.join(', ')}, optionally with :cluster`,
    );
  }
  if ((impl === 'relay-alone' || isWsFloor(impl as Implementation)) && text.includes(':')) {
    throw new Error(`${impl} has no Valkey topology: give it without :standalone or :cluster`);
  }
  if (mode !== 'standalone' && mode !== 'cluster') {
    throw new Error(`unknown topology "${mode}" in "${text}": expected standalone or cluster`);
  }
  return { implementation: impl as Implementation, mode };
}

/** The Valkey client each implementation uses. */
export function clientOf(impl: Implementation): ClientKind | null {
  if (impl === 'quotas-off' || impl === 'relay-alone' || isWsFloor(impl)) return null;
  if (impl === 'fastify-rate-limit') return 'ioredis';
  return impl.replace(/\+lease$/, '') as ClientKind;
}

/** Whether the implementation is a sluice client with quota leases on. */
export function leases(impl: Implementation): boolean {
  return impl.endsWith('+lease');
}
