/**
 * A benchmark session's plan: every run `run-all.sh` makes, in the order it makes them, built
 * from the clients (CLIENT_KINDS, with and without leases), the topologies, the workloads
 * (WORKLOAD_SPECS, variants and laws included) and the baselines. Pure: `sluice bench plan`
 * prints it, run-all.sh starts what it needs and runs it, nothing more.
 */
import { CLIENT_KINDS, TOPOLOGIES } from '../../store/options.js';
import type { Topology } from '../../store/options.js';
import { seededRandom } from '../../util/random.js';
import { LEASED_CLIENTS, WORKLOADS, WORKLOAD_SPECS, parseTarget } from './config.js';
import type { Implementation, RelayImpl, Workload, WorkloadSpec } from './config.js';

/** Benchmarks of their own (one command each), run after the runs, on standalone Valkey. */
export const COMMANDS = ['fleet', 'spike', 'step', 'oom'] as const;
export type Command = (typeof COMMANDS)[number];

export interface PlanOptions {
  /** Short settings and each client x topology x workload (and law) once; see QUICK. */
  quick?: boolean;
  /** Comma- or space-separated targets or groups (all | standalone | cluster | lease). */
  clients?: string;
  /** Comma- or space-separated workloads, groups (nostr, adaptive, both, everything) or commands. */
  workload?: string;
  /** dynamic | fixed30 | fixed120 | custom:N */
  durationMode?: string;
  concurrency?: number[];
  runs?: number;
  warmup?: number;
  keys?: number;
  /** false: no quotas-off or peer runs (relay-alone stays: it is what Nostr ratios divide by). */
  baselines?: boolean;
  relayImpl?: RelayImpl;
  /** HTTP workloads: an offered rate (open loop). */
  rate?: number;
  seed?: number;
}

/** The defaults of a full session, and what --quick changes (options given still win). */
export const DEFAULTS = {
  clients: 'all',
  workload: 'both',
  durationMode: 'dynamic',
  concurrency: [50, 100],
  runs: 3,
  warmup: 3,
  keys: 10_000,
  adaptiveDurationSec: 180,
  freshEventsPerSec: undefined as number | undefined,
};
/**
 * Quick shows that everything works in a few minutes, not figures: one run each, 2 s, no
 * warm-up, 500 identities. Its Nostr events are signed for 1500/s (the relay alone sends
 * about 2000/s here), not the full mode's 8000/s: signing is most of a short Nostr run.
 */
export const QUICK = {
  clients: 'all,lease',
  workload: 'light,heavy,flood,nostr,adaptive',
  durationMode: 'custom:2',
  concurrency: [50],
  runs: 1,
  warmup: 0,
  keys: 500,
  // The adaptive scenario's shortest (5 s calm, 5 s flood).
  adaptiveDurationSec: 10,
  freshEventsPerSec: 1500,
};

/** One run: run-benchmark.sh's settings, and the session's Valkey and relay it uses. */
export interface PlannedRun {
  kind: 'run';
  /** The round it belongs to (RUN); the configuration runs `runs` rounds. */
  run: number;
  runs: number;
  /** implementation[:cluster], as run-benchmark.sh's RATE_LIMITER_TYPE takes it. */
  target: string;
  implementation: Implementation;
  mode: Topology;
  workload: Workload;
  connections: number;
  durationSec: number;
  /** Which of the session's Valkeys it is given. */
  valkey: Topology;
  /** Which of the session's relays it is given (WorkloadSpec.relay). */
  relay: WorkloadSpec['relay'];
  /** run-benchmark.sh's environment for this run (the session's own settings aside). */
  env: Record<string, string>;
}

export interface PlannedCommand {
  kind: 'command';
  command: Command;
  /** fleet: the Valkey client it runs through (the first chosen client's). */
  client?: string;
}

/** What the session is: its settings, and what run-all.sh must start before the runs. */
export interface PlannedSession {
  kind: 'session';
  configurations: number;
  /** Runs in all (a configuration run once per session counts once). */
  total: number;
  runs: number;
  durationMode: string;
  concurrency: number[];
  warmup: number;
  keys: number;
  /** standalone, cluster (Valkey); relay-light, relay-heavy (shared reference relays). */
  needs: string[];
}

export type PlanEntry = PlannedSession | PlannedRun | PlannedCommand;

/** One configuration: a run without its round. */
type Configuration = Omit<PlannedRun, 'kind' | 'run' | 'runs' | 'env'> & { once: boolean };

const SLUICE_CLIENTS: readonly string[] = [...CLIENT_KINDS, ...LEASED_CLIENTS];
const withTopology = (names: readonly string[], mode: Topology) =>
  names.map((n) => (mode === 'cluster' ? `${n}:cluster` : n));
const CLIENT_GROUPS: Record<string, string[]> = {
  all: TOPOLOGIES.flatMap((m) => withTopology(CLIENT_KINDS, m)),
  standalone: withTopology(CLIENT_KINDS, 'standalone'),
  cluster: withTopology(CLIENT_KINDS, 'cluster'),
  lease: TOPOLOGIES.flatMap((m) => withTopology(LEASED_CLIENTS, m)),
};

const words = (list: string) => list.split(/[\s,]+/).filter(Boolean);
const unique = <T>(items: T[]) => [...new Set(items)];

/** The chosen targets (implementation[:cluster]), in order, each once. */
export function parseClients(list: string): string[] {
  const targets = words(list).flatMap((item) => {
    const group = CLIENT_GROUPS[item];
    if (group) return group;
    let known = false;
    try {
      known = SLUICE_CLIENTS.includes(parseTarget(item).implementation);
    } catch {
      // named below
    }
    if (!known) {
      throw new Error(
        `--clients: unknown client '${item}' (${CLIENT_KINDS.join(', ')}, optionally +lease and :cluster, or ${Object.keys(CLIENT_GROUPS).join('/')})`,
      );
    }
    return [item];
  });
  if (targets.length === 0) throw new Error('--clients names no client');
  return unique(targets);
}

/** The chosen workloads (in WORKLOAD_SPECS' order) and commands (in COMMANDS' order). */
export function parseWorkloads(list: string): { workloads: Workload[]; commands: Command[] } {
  const named = new Set<string>();
  for (const item of words(list)) {
    const members =
      item === 'both'
        ? ['light', 'heavy']
        : item === 'everything'
          ? [...WORKLOADS, 'fleet', 'spike', 'step']
          : [
              ...WORKLOADS.filter((w) => (WORKLOAD_SPECS[w] as WorkloadSpec).group === item),
              ...(WORKLOADS as readonly string[]).concat(COMMANDS).filter((w) => w === item),
            ];
    if (members.length === 0) {
      throw new Error(
        `--workload: unknown workload '${item}' (${[...WORKLOADS, 'nostr', 'adaptive', 'both', 'fleet', 'spike', 'step', 'everything', 'oom'].filter((w, i, a) => a.indexOf(w) === i).join(', ')})`,
      );
    }
    for (const m of members) named.add(m);
  }
  return {
    workloads: WORKLOADS.filter((w) => named.has(w)),
    commands: COMMANDS.filter((c) => named.has(c)),
  };
}

/** Seconds measured per run of `connections` on `mode`. */
export function durationFor(durationMode: string, connections: number, mode: Topology): number {
  if (durationMode === 'dynamic')
    return (connections > 100 ? 180 : 120) + (mode === 'cluster' ? 30 : 0);
  if (durationMode === 'fixed30') return 30;
  if (durationMode === 'fixed120') return 120;
  const custom = /^custom:([1-9]\d*)$/.exec(durationMode);
  if (custom) return Number(custom[1]);
  throw new Error(
    durationMode.startsWith('custom:')
      ? `--duration-mode custom:N needs a positive N, got '${durationMode.slice(7)}'`
      : `--duration-mode: unknown mode '${durationMode}' (dynamic, fixed30, fixed120, custom:N)`,
  );
}

function configurations(
  targets: string[],
  workloads: Workload[],
  o: { durationMode: string; concurrency: number[]; baselines: boolean; adaptiveSec: number },
): Configuration[] {
  const modes = unique(targets.map((t) => parseTarget(t).mode));
  const configs: Configuration[] = [];
  const add = (target: string, workload: Workload, connections: number, durationSec: number) => {
    const { implementation, mode } = parseTarget(target);
    const spec: WorkloadSpec = WORKLOAD_SPECS[workload];
    configs.push({
      target,
      implementation,
      mode,
      workload,
      connections,
      durationSec,
      valkey: mode,
      relay: spec.relay,
      once: spec.once === true,
    });
  };
  for (const workload of workloads) {
    const spec: WorkloadSpec = WORKLOAD_SPECS[workload];
    if (spec.once) {
      // Adaptive: 4 writers, once per session, through the first chosen client.
      add(targets[0]!, workload, 4, o.adaptiveSec);
      continue;
    }
    for (const c of o.concurrency) {
      for (const t of spec.firstClientOnly ? [targets[0]!] : targets) {
        add(t, workload, c, durationFor(o.durationMode, c, parseTarget(t).mode));
      }
      // The relay by itself (no Valkey, so no topology): what EVENT/s through it divides by.
      if (spec.relayAlone)
        add('relay-alone', workload, c, durationFor(o.durationMode, c, 'standalone'));
      if (!o.baselines) continue;
      for (const mode of modes) {
        for (const b of spec.baselines) {
          add(withTopology([b], mode)[0]!, workload, c, durationFor(o.durationMode, c, mode));
        }
      }
    }
  }
  return configs;
}

/**
 * Quick keeps each client x topology x workload once (one concurrency) and cuts the rest:
 * leases run once per topology (through the first leased client), each baseline once, on
 * the first workload and topology that have them; relay-alone and the variants stay (they
 * run once already).
 */
function quickCut(configs: Configuration[]): Configuration[] {
  const seen = new Set<string>();
  return configs.filter((c) => {
    const family = (LEASED_CLIENTS as readonly string[]).includes(c.implementation)
      ? `+lease ${c.mode}`
      : (CLIENT_KINDS as readonly string[]).includes(c.implementation) ||
          c.implementation === 'relay-alone'
        ? undefined
        : c.implementation;
    if (family === undefined) return true;
    if (seen.has(family)) return false;
    seen.add(family);
    return true;
  });
}

function shuffled<T>(items: T[], random: () => number): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

/** The session, then every run in order (each round shuffled by the seed), then the commands. */
export function plan(options: PlanOptions): PlanEntry[] {
  const d = options.quick ? QUICK : DEFAULTS;
  const durationMode = options.durationMode ?? d.durationMode;
  const concurrency = options.concurrency ?? d.concurrency;
  const runs = options.runs ?? d.runs;
  const warmup = options.warmup ?? d.warmup;
  const keys = options.keys ?? d.keys;
  const seed = options.seed ?? 1;
  const relayImpl = options.relayImpl ?? 'reference';
  if (concurrency.length === 0) throw new Error('--concurrency needs at least one value');
  durationFor(durationMode, concurrency[0]!, 'standalone'); // checked even with no run
  const targets = parseClients(options.clients ?? d.clients);
  const { workloads, commands } = parseWorkloads(options.workload ?? d.workload);
  if (relayImpl !== 'reference') {
    const http = [
      ...workloads.filter((w) => WORKLOAD_SPECS[w].transport !== 'websocket'),
      ...commands.filter((c) => c !== 'oom'),
    ];
    if (http.length > 0) {
      throw new Error(
        `--relay-impl ${relayImpl} only speaks Nostr (WebSocket): the ${http[0]} workload needs the reference relay; use --workload nostr or oom`,
      );
    }
  }
  let configs = configurations(targets, workloads, {
    durationMode,
    concurrency,
    baselines: options.baselines ?? true,
    adaptiveSec: d.adaptiveDurationSec,
  });
  if (options.quick) configs = quickCut(configs);

  // relay-alone uses no Valkey: it is given the standalone one, or the cluster when the
  // session starts no standalone.
  const standalone =
    commands.length > 0 ||
    configs.some((c) => c.implementation !== 'relay-alone' && c.mode === 'standalone');
  for (const c of configs)
    if (c.implementation === 'relay-alone' && !standalone) c.valkey = 'cluster';
  const needs = [
    ...TOPOLOGIES.filter(
      (m) => (m === 'standalone' && commands.length > 0) || configs.some((c) => c.valkey === m),
    ),
    ...(['light', 'heavy'] as const)
      .filter((r) => configs.some((c) => c.relay === r))
      .map((r) => `relay-${r}`),
  ];

  const entries: PlanEntry[] = [];
  const once = configs.filter((c) => c.once).length;
  entries.push({
    kind: 'session',
    configurations: configs.length,
    total: (configs.length - once) * runs + once,
    runs,
    durationMode,
    concurrency,
    warmup,
    keys,
    needs,
  });
  for (let run = 1; run <= runs; run++) {
    const round = configs.filter((c) => run === 1 || !c.once);
    for (const c of shuffled(round, seededRandom(seed * 1000 + run))) {
      const { once: isOnce, ...config } = c;
      const spec: WorkloadSpec = WORKLOAD_SPECS[c.workload];
      const env: Record<string, string> = {
        RATE_LIMITER_TYPE: c.target,
        REQUEST_TYPE: c.workload,
        CONNECTIONS: String(c.connections),
        DURATION: String(c.durationSec),
        WARMUP: String(warmup),
        RUN: String(run),
        RUNS: String(isOnce ? 1 : runs),
        KEYS: String(keys),
      };
      if (options.rate && spec.transport === 'http' && !spec.law) env.RATE = String(options.rate);
      if (d.freshEventsPerSec && spec.load === 'nostr') {
        env.FRESH_EVENTS_PER_SEC = String(d.freshEventsPerSec);
      }
      entries.push({ kind: 'run', run, runs: isOnce ? 1 : runs, ...config, env });
    }
  }
  for (const command of commands) {
    const first = parseTarget(targets[0]!).implementation.replace(/\+lease$/, '');
    entries.push(
      command === 'fleet'
        ? { kind: 'command', command, client: first }
        : { kind: 'command', command },
    );
  }
  return entries;
}

/**
 * The plan as tab-separated lines for run-all.sh (bash reads no JSON): `session` then
 * key=value fields; `needs` then names; `run`, its Valkey, its relay, a label, then its
 * environment as KEY=value fields; `command`, its name and its client.
 */
export function planLines(entries: PlanEntry[]): string[] {
  return entries.map((e) => {
    if (e.kind === 'session') {
      const { kind, needs, concurrency, ...rest } = e;
      return [
        kind,
        ...Object.entries(rest).map(([k, v]) => `${k}=${v}`),
        `concurrency=${concurrency.join(' ')}`,
        `needs=${needs.join(' ')}`,
      ].join('\t');
    }
    if (e.kind === 'command') return ['command', e.command, e.client ?? ''].join('\t');
    const label = `run ${e.run}/${e.runs}  ${e.target} ${e.workload} ${e.connections}c ${e.durationSec}s`;
    return [
      'run',
      e.valkey,
      e.relay,
      label,
      ...Object.entries(e.env).map(([k, v]) => `${k}=${v}`),
    ].join('\t');
  });
}
