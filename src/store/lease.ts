import type { ClientConnection, ScriptRunner } from './clients/driver.js';
import { storeCall } from './errors.js';

/**
 * Quota leases, on the very counter key rate-limiter-flexible uses for the same quota (an
 * integer with the window as its expiry), so leased points and exactly consumed points are
 * one count. Both scripts touch one key: one round trip, atomic, on either topology.
 */

/**
 * Take up to ARGV[1] points, never past the limit ARGV[2]; a new window lasts ARGV[3] ms.
 * ARGV[4] is the least worth taking (fewer left: nothing is taken), ARGV[5] a divisor of what
 * is left: a take beyond `need` gets at most left / divisor, so no holder can corner the rest.
 */
const TAKE = `
local want = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
local need = tonumber(ARGV[4])
local used = tonumber(redis.call('GET', KEYS[1]) or '0')
local left = limit - used
if want <= 0 or left <= 0 or left < need then
  return {0, used, redis.call('PTTL', KEYS[1])}
end
local grant = math.min(want, left, math.max(need, math.floor(left / tonumber(ARGV[5]))))
if used == 0 and redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('SET', KEYS[1], grant, 'PX', ARGV[3])
else
  redis.call('INCRBY', KEYS[1], grant)
end
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  ttl = tonumber(ARGV[3])
end
return {grant, used + grant, ttl}
`;

/**
 * Give back up to ARGV[1] points, only to the window that granted them: one that still has
 * more than ARGV[2] ms and at most ARGV[3] ms to live (a later window would live longer).
 */
const GIVE_BACK = `
local ttl = redis.call('PTTL', KEYS[1])
if ttl <= tonumber(ARGV[2]) or ttl > tonumber(ARGV[3]) then return 0 end
local n = math.min(tonumber(ARGV[1]), tonumber(redis.call('GET', KEYS[1]) or '0'))
if n > 0 then redis.call('DECRBY', KEYS[1], n) end
return n
`;

/** What one take returned. */
export interface Lease {
  /** Points granted to this caller: 0 when the limit leaves none. */
  granted: number;
  /** The counter after the grant: every point consumed or leased in this window. */
  consumed: number;
  /** Milliseconds the window has left (0 when the key does not exist). */
  msLeft: number;
}

/** How much of what is left a take may get. */
export interface TakeBounds {
  /** Take nothing unless at least this many points are left (default: 1, or 0 for want 0). */
  need?: number;
  /** Grant beyond `need` at most (points left) / divisor (default 1: all of it). */
  divisor?: number;
}

export interface LeaseStore {
  take(
    key: string,
    want: number,
    limit: number,
    windowMs: number,
    bounds?: TakeBounds,
  ): Promise<Lease>;
  /**
   * Hand `points` back to the window that will end `msLeft` from now (as the caller reckons
   * it; `slackMs` covers the round trip). Nothing is given back to a window that ends within
   * `slackMs` or to any later one, so a point never returns to a window that did not lease it.
   */
  giveBack(key: string, points: number, msLeft: number, slackMs: number): Promise<number>;
}

/** The scripts by the names the client registers them under. */
const SCRIPTS = { sluiceLeaseTake: TAKE, sluiceLeaseGiveBack: GIVE_BACK };
type Script = keyof typeof SCRIPTS;

/**
 * The scripts' command names, which ioredis / iovalkey send on their own, not auto-pipelined
 * (clients/io.ts): takes are sparse (most writes spend a held point), and a pipeline built
 * for one command costs more CPU than the write it saves, most in cluster. Where they are not
 * (a public relay's long tail: a take an event), the takes of one event-loop turn still leave
 * in one socket write (clients/io-writes.ts), each its own command under its own timeout.
 */
export const LEASE_COMMANDS: readonly Script[] = ['sluiceLeaseTake', 'sluiceLeaseGiveBack'];

/** A script argument that must be a whole count (no allocation: a take runs per lease). */
function count(name: string, n: number): void {
  if (!Number.isInteger(n) || n < 0) throw new RangeError(`${name} must be an integer >= 0`);
}

/** Scripts are registered on first use: a gateway without leases never loads them. */
export function leaseStore(conn: Pick<ClientConnection, 'scripts'>): LeaseStore {
  let cached: ScriptRunner<Script> | undefined;
  const call = (script: Script, what: string, key: string, args: number[]) =>
    storeCall(`lease ${what}`, () =>
      (cached ??= conn.scripts(SCRIPTS))(script, key, args.map(String)),
    );
  return {
    async take(key, want, limit, windowMs, bounds = {}) {
      const need = bounds.need ?? Math.min(1, want);
      const divisor = bounds.divisor ?? 1;
      count('want', want);
      count('limit', limit);
      count('windowMs', windowMs);
      count('need', need);
      if (need > want) throw new RangeError('need must not exceed want');
      if (!(divisor >= 1)) throw new RangeError('divisor must be >= 1');
      const reply = (await call('sluiceLeaseTake', 'take', key, [
        want,
        limit,
        windowMs,
        need,
        divisor,
      ])) as number[];
      const [granted, consumed, ttl] = reply.map(Number) as [number, number, number];
      return { granted, consumed, msLeft: Math.max(0, ttl) };
    },
    async giveBack(key, points, msLeft, slackMs) {
      if (points <= 0 || msLeft <= slackMs) return 0;
      const args = [Math.floor(points), Math.ceil(slackMs), Math.ceil(msLeft + slackMs)];
      return Number(await call('sluiceLeaseGiveBack', 'giveBack', key, args));
    },
  };
}
