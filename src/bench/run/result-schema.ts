/**
 * The run file's contract: what `bench run` writes and what the report reads. TypeScript is
 * its only producer; docs/run-file.schema.json is generated from this schema
 * (`sluice bench schema`, checked by the tests) and the Python report validates every file
 * against it.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { CLIENT_KINDS, TOPOLOGIES } from '../../store/options.js';
import { CLIENTS } from '../../store/clients/registry.js';
import {
  ARMS,
  ARM_LABELS,
  IMPLEMENTATIONS,
  LOADS,
  NOSTR_IDENTITIES,
  RELAY_IMPLS,
  WORKLOAD_SPECS,
  WORKLOADS,
} from './config.js';

const count = z.number().int().nonnegative();
const nullableNumber = z.number().nullable();
const meanMax = z.strictObject({ mean: nullableNumber, max: nullableNumber });

const RunConfigSchema = z.strictObject({
  implementation: z.enum(IMPLEMENTATIONS),
  client: z.enum(CLIENT_KINDS).nullable(),
  mode: z.enum(TOPOLOGIES),
  workload: z.enum(LOADS),
  transport: z.enum(['http', 'websocket']),
  connections: count,
  durationSec: z.number().positive(),
  warmupSec: z.number().nonnegative(),
  run: z.number().int().positive(),
  runs: z.number().int().positive(),
  keys: count,
  distribution: z.enum(['uniform', 'zipf']),
  zipfExponent: nullableNumber,
  floodShare: nullableNumber,
  quota: z.strictObject({ points: count, windowSec: z.number().positive() }),
  inMemoryBlock: z.boolean(),
  ranges: z.boolean().optional(),
  ipv6Clients: z.boolean().optional(),
  maxTrackedClients: count.optional(),
  relayWorkIterations: count,
  law: z.enum(ARMS).nullable(),
  seed: z.number().int(),
  relayImpl: z.enum(RELAY_IMPLS).optional(),
  freshEvents: z.strictObject({ maxPerSec: z.number(), authors: count }).nullable().optional(),
  nostrIdentity: z.enum(NOSTR_IDENTITIES).optional(),
  workers: z.union([z.number().int().positive(), z.literal('auto')]).optional(),
  cpus: z.array(z.number().int().nonnegative()).nullable().optional(),
  loadCpus: z.array(z.number().int().nonnegative()).nullable().optional(),
  rate: z.number().positive().nullable().optional(),
});

const CountsSchema = z.strictObject({
  requests: count,
  ok2xx: count,
  limited429: count,
  otherNon2xx: count,
  errors: count,
  timeouts: count,
  otherStatuses: z.record(z.string(), count),
});

const ProcessSchema = z.strictObject({
  role: z.enum(['gateway', 'peer', 'relay', 'feed', 'valkey']),
  name: z.string(),
  pid: z.number().int(),
  cpuPercent: meanMax,
  rssBytes: meanMax,
  cpuMs: nullableNumber,
  cpuMsPerRequest: nullableNumber,
  samples: z.array(z.tuple([z.number(), z.number(), z.number()])),
  problem: z.string().optional(),
});

/** Every rate and share the report shows, stated once here: the report never recomputes them. */
const RatesSchema = z.strictObject({
  requestsPerSec: z.number(),
  okPerSec: z.number(),
  limitedPerSec: z.number(),
  otherNon2xxPerSec: z.number(),
  errorsPerSec: z.number(),
  limitedShare: z.number().min(0).max(1),
});

const LoadSchema = z.union([
  z.strictObject({ mode: z.literal('closed') }),
  z.strictObject({
    mode: z.literal('arrival'),
    offeredRate: z.number(),
    achievedRate: z.number(),
    late: count,
    unsent: count,
  }),
]);

/** The run file's format name, in every file's `schema` field. */
export const RESULT_SCHEMA = 'sluice-bench-run/1' as const;

export const RunFileSchema = z.strictObject({
  schema: z.literal(RESULT_SCHEMA),
  status: z.enum(['ok', 'failed']),
  failureReasons: z.array(z.string()),
  config: RunConfigSchema,
  clientSettings: z.record(z.string(), z.unknown()).nullable(),
  startedAt: z.string(),
  finishedAt: z.string(),
  machine: z.record(z.string(), z.unknown()),
  versions: z.record(z.string(), z.string()),
  wallSeconds: z.number().positive().nullable(),
  counts: CountsSchema.nullable(),
  rates: RatesSchema.nullable(),
  latencyMs: z
    .object({
      p50: z.number(),
      p90: z.number(),
      p99: z.number(),
      max: z.number(),
      mean: z.number(),
    })
    .nullable(),
  processes: z.array(ProcessSchema),
  valkey: z
    .object({
      commands: z.record(z.string(), count),
      calls: count,
      perRequest: nullableNumber,
      scriptCalls: count,
      scriptCallsPerRequest: nullableNumber,
    })
    .nullable(),
  /** +lease implementations: the gateway's lease accounting (sluice_lease_points_total). */
  leases: z
    .object({
      leased: count,
      spent: count,
      returned: count,
      expired: count,
      /** Absent in runs from before quotas.lease.credit. */
      credited: count.optional(),
      held: count,
      overAdmitted: count,
      unspent: count,
    })
    .nullable()
    .optional(),
  timeseries: z.record(z.string(), z.array(z.unknown())).nullable(),
  adaptive: z.record(z.string(), z.unknown()).nullable(),
  load: LoadSchema.nullable().optional(),
  events: z
    .object({
      source: z.literal('fresh'),
      signed: count,
      signSeconds: z.number(),
      sent: count,
      duplicates: count,
      windowRatePerSec: nullableNumber,
      /** Distinct keys that signed the events (a long-tail run: one per event). */
      authors: count.optional(),
    })
    .nullable()
    .optional(),
  /**
   * nostr-reads: pages of `limit` events asked of a relay holding `stored`, and the EVENT frames
   * the answered REQs (counts.requests) carried. Absent in other runs and older files.
   */
  reads: z
    .strictObject({
      stored: count,
      limit: count,
      events: count,
      eventsPerSec: z.number(),
    })
    .nullable()
    .optional(),
  /**
   * The load generator's own CPU over the window (this process, every thread), apart from the
   * processes under test; absent in files from before it was recorded.
   */
  loadGenerator: z.strictObject({ cpuMs: count, cpuMsPerRequest: nullableNumber }).optional(),
  /**
   * Gateway processes that served the load (the workers of a multi-worker gateway, else 1);
   * null without a sluice gateway (relay-alone, the ws floors, the peer). Absent in older files.
   */
  gatewayWorkers: count.nullable().optional(),
  /**
   * The cores each process under test, and the load generator, was allowed to run on during
   * the window (Cpus_allowed_list of /proc/<pid>/status), pinned or not. Absent in older files.
   */
  affinity: z
    .array(
      z.strictObject({
        role: z.enum(['gateway', 'peer', 'relay', 'feed', 'valkey', 'load']),
        name: z.string(),
        pid: z.number().int(),
        cpus: z.string(),
      }),
    )
    .optional(),
  /** nostr-at-limit: what authors and the sender were admitted against their limits. */
  pastLimit: z
    .strictObject({
      authorLimit: count,
      authors: count,
      authorsAtLimit: count,
      maxStored: count,
      authorsOverAdmitted: count,
      senderLimit: count,
      senderStored: count,
      senderOverAdmitted: count,
    })
    .nullable()
    .optional(),
});

export type RunFile = z.infer<typeof RunFileSchema>;
type Counts = z.infer<typeof CountsSchema>;

/** Counts over the measured window: the run file's rates and the 429 share of responses. */
export function ratesOf(
  counts: Pick<Counts, 'requests' | 'ok2xx' | 'limited429' | 'otherNon2xx' | 'errors'>,
  wallSeconds: number,
): z.infer<typeof RatesSchema> {
  const per = (n: number) => n / wallSeconds;
  return {
    requestsPerSec: per(counts.requests),
    okPerSec: per(counts.ok2xx),
    limitedPerSec: per(counts.limited429),
    otherNon2xxPerSec: per(counts.otherNon2xx),
    errorsPerSec: per(counts.errors),
    limitedShare: counts.requests ? counts.limited429 / counts.requests : 0,
  };
}

/** The JSON Schema of a run file, as checked in under docs/. */
export function runFileJsonSchema(): Record<string, unknown> {
  return {
    ...z.toJSONSchema(RunFileSchema, { target: 'draft-2020-12' }),
    $id: 'https://sluice.example/run-file.schema.json',
    title: 'sluice bench run result (one run)',
    $defs: {
      workloadName: workloadNameSchema(),
      clientName: clientNameSchema(),
      lawName: lawNameSchema(),
    },
  };
}

/**
 * An adaptive arm by name (config.law), in the report's order: no adaptation, then each
 * control law of the laws' registry, with its name in the report (`x-labels`).
 */
function lawNameSchema() {
  return {
    description: "an adaptive run's law by name (config.law): x-labels its name in the report",
    type: 'string',
    enum: ARMS,
    'x-labels': ARM_LABELS,
  };
}

/**
 * A Valkey client by name (config.client), in the report's order, from the clients' table
 * (CLIENTS): the report's short names for chart axes (`x-labels`), and the clients whose
 * library has no in-flight limit, whose null there is no setting (`x-no-inflight-limit`).
 */
function clientNameSchema() {
  return {
    description:
      'a Valkey client by name (config.client): x-labels its name on chart axes, x-no-inflight-limit the clients whose library has no in-flight limit',
    type: 'string',
    enum: CLIENT_KINDS,
    'x-labels': Object.fromEntries(CLIENT_KINDS.map((c) => [c, CLIENTS[c].label])),
    'x-no-inflight-limit': CLIENT_KINDS.filter((c) => !CLIENTS[c].inflightLimit),
  };
}

/**
 * A run's workload as the plan, `bench run --workload` and the report name it, in the
 * report's order: config.workload, or the Nostr variant its config.nostrIdentity names
 * (`x-variants`). The report reads its names here, so they have one source: WORKLOAD_SPECS.
 */
function workloadNameSchema() {
  const variants = Object.fromEntries(
    WORKLOADS.filter((w) => w !== WORKLOAD_SPECS[w].load).map((w) => {
      const spec: { load: string; nostrIdentity?: string } = WORKLOAD_SPECS[w];
      return [w, { workload: spec.load, nostrIdentity: spec.nostrIdentity }];
    }),
  );
  return {
    description:
      "a run's workload by name: config.workload, or the variant of x-variants its config.nostrIdentity picks",
    type: 'string',
    enum: WORKLOADS,
    'x-variants': variants,
  };
}

/**
 * Write a run file, checked against the contract first: a field that drifted from the schema
 * fails the run here (naming the field), not the report later.
 */
export function writeRunFile(file: string, result: RunFile): void {
  const checked = RunFileSchema.safeParse(result);
  if (!checked.success) {
    throw new Error(`the run file breaks its schema: ${z.prettifyError(checked.error)}`);
  }
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, JSON.stringify(result, null, 2) + '\n');
}
