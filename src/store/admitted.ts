import type { ClientConnection, ScriptRunner } from './clients/driver.js';
import { storeCall } from './errors.js';

/**
 * What the gateways admitted to each relay node, for its feed to learn the node's drain
 * (pressure/budget): one hash per node, `sluice:admitted:{<node>}`, with the cumulative write
 * bytes (`b`) and write points (`p`) every gateway forwarded to it. Gateways add to it in
 * batches (pressure/budget/admitted-tally.ts: one script call per node per flush, never one
 * per write); the feed reads it on its tick and differentiates. Cumulative, so a lost read
 * loses nothing; the key lives an hour past its last addition, and a feed reading a smaller
 * count than before (expired, Valkey restarted) takes it as a restart of its windows.
 */

/** One key per node; the hash tag keeps it on one slot in a cluster. */
export function admittedKey(nodeId: string): string {
  return `sluice:admitted:{${nodeId}}`;
}

/** ARGV: bytes, points, ttl ms. One round trip, atomic, on either topology. */
const ADD = `
redis.call('HINCRBY', KEYS[1], 'b', ARGV[1])
redis.call('HINCRBY', KEYS[1], 'p', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
`;

const READ = `
return redis.call('HMGET', KEYS[1], 'b', 'p')
`;

const SCRIPTS = { sluiceAdmittedAdd: ADD, sluiceAdmittedRead: READ };
type Script = keyof typeof SCRIPTS;

/** The counter lives this long after the last addition. */
export const ADMITTED_TTL_MS = 3_600_000;

export interface AdmittedCounts {
  /** Add to the node's counts (whole numbers >= 0). */
  add(nodeId: string, bytes: number, points: number): Promise<void>;
  /** The node's counts so far ({0, 0} when none). */
  read(nodeId: string): Promise<{ bytes: number; points: number }>;
}

/** A count read back: a whole number >= 0, else 0 (a garbage value never counts as traffic). */
function count(v: unknown): number {
  const n = Number(v ?? 0);
  return Number.isSafeInteger(n) && n >= 0 ? n : 0;
}

/** Scripts are registered on first use: a gateway without pressure never loads them. */
export function admittedCounts(conn: Pick<ClientConnection, 'scripts'>): AdmittedCounts {
  let cached: ScriptRunner<Script> | undefined;
  const call = (script: Script, what: string, key: string, args: string[]) =>
    storeCall(`admitted ${what}`, () => (cached ??= conn.scripts(SCRIPTS))(script, [key], args));
  return {
    async add(nodeId, bytes, points) {
      for (const [name, n] of [
        ['bytes', bytes],
        ['points', points],
      ] as const) {
        if (!Number.isSafeInteger(n) || n < 0)
          throw new RangeError(`${name} must be an integer >= 0`);
      }
      await call('sluiceAdmittedAdd', 'add', admittedKey(nodeId), [
        String(bytes),
        String(points),
        String(ADMITTED_TTL_MS),
      ]);
    },
    async read(nodeId) {
      const reply = (await call(
        'sluiceAdmittedRead',
        'read',
        admittedKey(nodeId),
        [],
      )) as unknown[];
      return { bytes: count(reply?.[0]), points: count(reply?.[1]) };
    },
  };
}
