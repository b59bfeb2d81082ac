import { z } from 'zod';
import { valueAt } from '../util/data.js';
import { StoreConfigError } from './errors.js';
import { CLIENTS } from './clients/registry.js';

/** The Valkey clients by name, in the report's order (the table: clients/registry.ts). */
export type ClientKind = keyof typeof CLIENTS;
export const CLIENT_KINDS = Object.keys(CLIENTS) as [ClientKind, ...ClientKind[]];
/**
 * The client a gateway (and every command) uses unless told: iovalkey, the least CPU a write
 * on the measured paths (issue 32: gateway CPU an EVENT 0.60-0.73 of the relay's against
 * valkey-glide's 0.77-0.94 on the long tail, both topologies; HTTP light 2,743 req/s against
 * 2,274; docs/BENCHMARKS.md). glide's Rust core is a thread of the gateway's and a socket hop
 * per command batch.
 */
export const DEFAULT_CLIENT: ClientKind = 'iovalkey';
export const TOPOLOGIES = ['standalone', 'cluster'] as const;
export type Topology = (typeof TOPOLOGIES)[number];

const NodeAddress = z.object({
  host: z.string().min(1),
  port: z.number().int().min(1).max(65535),
});
export type NodeAddress = z.infer<typeof NodeAddress>;

/**
 * Options of createStore. Timeouts and the in-flight limit are set explicitly for every
 * client, so benchmarks compare clients under equal settings.
 */
export const StoreOptionsSchema = z.object({
  client: z.enum(CLIENT_KINDS),
  mode: z.enum(TOPOLOGIES).default('standalone'),
  nodes: z.array(NodeAddress).min(1, 'at least one Valkey node is required'),
  timeouts: z
    .object({
      /** Time allowed to connect and become ready, at start and per reconnect attempt. */
      connectMs: z.number().int().positive().default(2000),
      /** Time allowed for one command before it fails as a store error. */
      commandMs: z.number().int().positive().default(500),
    })
    .prefault({}),
  /** Requests in flight per connection before new ones fail fast (glide only enforces it). */
  inflightLimit: z.number().int().positive().default(1000),
  /** ioredis / iovalkey: batch the commands issued in one event-loop tick. */
  autoPipelining: z.boolean().default(true),
  clientName: z.string().min(1).default('sluice'),
});
export type StoreOptionsInput = z.input<typeof StoreOptionsSchema>;
export type StoreOptions = z.output<typeof StoreOptionsSchema>;

/** Validate store options; the error names each offending key and what was received. */
export function parseStoreOptions(input: unknown): StoreOptions {
  const parsed = StoreOptionsSchema.safeParse(input);
  if (parsed.success) return parsed.data;
  const problems = parsed.error.issues.map((issue) => {
    const path = issue.path.join('.') || '(root)';
    const received = valueAt(input, issue.path);
    const shown = received === undefined ? '' : ` (got ${JSON.stringify(received)})`;
    return `store.${path}: ${issue.message}${shown}`;
  });
  throw new StoreConfigError(`invalid store options: ${problems.join('; ')}`);
}

/** Parse "host:port" (host defaults to 127.0.0.1). */
export function parseNodeAddress(text: string): NodeAddress {
  const match = /^(?:(.+):)?(\d+)$/.exec(text.trim());
  if (!match) throw new StoreConfigError(`invalid Valkey address "${text}": expected host:port`);
  return { host: match[1] ?? '127.0.0.1', port: Number(match[2]) };
}
