import type { ClientConnection, ScriptRunner } from './clients/driver.js';
import { StoreError, storeCall } from './errors.js';

/**
 * Quota leases, on the very counter key rate-limiter-flexible uses for the same quota (an
 * integer with the window as its expiry), so leased points and exactly consumed points are
 * one count. A give-back touches one key; a take call takes for every key given it (the takes
 * of one moment), in one round trip, atomic: in cluster one key a call, as a script's keys
 * must share a slot.
 */

/**
 * Take points for each key of KEYS in turn, with five ARGV per key: up to ARGV[a+1] points,
 * never past the limit ARGV[a+2]; a new window lasts ARGV[a+3] ms. ARGV[a+4] is the least worth
 * taking (fewer left: nothing is taken), ARGV[a+5] a divisor of what is left: a take beyond
 * `need` gets at most left / divisor, so no holder can corner the rest. Replies
 * {granted, consumed, pttl} per key, in KEYS' order; a key that holds no count (another type,
 * not a number) replies {-1, 0, 0} and changes nothing, and the other keys' takes stand.
 */
const TAKE = `
local function take(key, want, limit, windowMs, need, divisor)
  local used = tonumber(redis.call('GET', key) or '0')
  if used == nil then return -1, 0, 0 end
  local left = limit - used
  if want <= 0 or left <= 0 or left < need then
    return 0, used, redis.call('PTTL', key)
  end
  local grant = math.min(want, left, math.max(need, math.floor(left / divisor)))
  if used == 0 and redis.call('EXISTS', key) == 0 then
    redis.call('SET', key, grant, 'PX', windowMs)
  else
    redis.call('INCRBY', key, grant)
  end
  local ttl = redis.call('PTTL', key)
  if ttl < 0 then
    redis.call('PEXPIRE', key, windowMs)
    ttl = windowMs
  end
  return grant, used + grant, ttl
end
local out = {}
for i = 1, #KEYS do
  local a = (i - 1) * 5
  local ok, grant, consumed, ttl = pcall(take, KEYS[i], tonumber(ARGV[a + 1]),
    tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4]), tonumber(ARGV[a + 5]))
  if not ok then grant, consumed, ttl = -1, 0, 0 end
  out[#out + 1] = grant
  out[#out + 1] = consumed
  out[#out + 1] = ttl
end
return out
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
 * (a public relay's long tail: a take an event), on standalone the takes of one moment share
 * a call (leaseStore).
 */
export const LEASE_COMMANDS: readonly Script[] = ['sluiceLeaseTake', 'sluiceLeaseGiveBack'];

/**
 * Most takes one script call carries: a script holds Valkey for its whole run, so a burst is
 * sent as several calls of this many rather than one long one.
 */
export const MAX_TAKES_PER_CALL = 64;

export interface LeaseStoreOptions {
  /**
   * Takes of one moment share a call only when their keys share a slot: true (the default,
   * which is right on either topology) sends each take as its own call at once; false sends
   * a moment's first take at once and the rest together at the moment's end.
   */
  cluster?: boolean;
}

/** Why `n` is not a whole count >= 0, or nothing when it is (no allocation: a take an event). */
function notCount(name: string, n: number): RangeError | undefined {
  return Number.isInteger(n) && n >= 0
    ? undefined
    : new RangeError(`${name} must be an integer >= 0`);
}

/** A take waiting for its call. */
interface QueuedTake {
  key: string;
  args: string[];
  resolve: (lease: Lease) => void;
  reject: (err: unknown) => void;
}

/**
 * Scripts are registered on first use: a gateway without leases never loads them. On
 * standalone Valkey, the takes asked for in one run of the event loop's callbacks and their
 * promise jobs (the credited takes of a batch, a turn's frames) share a script call: the
 * client's cost is per command (a Command, a promise, a timeout timer, a reply parse), so n
 * takes in one call cost it little more than one. Nothing waits longer than it did: the call
 * is written in the same turn the takes were asked in. In cluster each take is its own call.
 */
export function leaseStore(
  conn: Pick<ClientConnection, 'scripts'>,
  opts: LeaseStoreOptions = {},
): LeaseStore {
  const cluster = opts.cluster ?? true;
  let cached: ScriptRunner<Script> | undefined;
  const run = (script: Script, keys: string[], args: string[]) =>
    (cached ??= conn.scripts(SCRIPTS))(script, keys, args);
  let queued: QueuedTake[] = [];

  const sendTakes = (takes: QueuedTake[]): void => {
    const keys = takes.map((t) => t.key);
    const args = takes.flatMap((t) => t.args);
    storeCall('lease take', async () => {
      const reply = (await run('sluiceLeaseTake', keys, args)) as unknown[];
      if (!Array.isArray(reply) || reply.length !== 3 * takes.length) {
        throw new Error(`a take of ${takes.length} keys replied ${JSON.stringify(reply)}`);
      }
      return reply;
    }).then(
      (reply) => {
        for (let i = 0; i < takes.length; i++) {
          const take = takes[i]!;
          const granted = Number(reply[3 * i]);
          if (granted < 0) {
            take.reject(new StoreError(`lease take failed: ${take.key} holds no count`));
            continue;
          }
          const ttl = Number(reply[3 * i + 2]);
          take.resolve({ granted, consumed: Number(reply[3 * i + 1]), msLeft: Math.max(0, ttl) });
        }
      },
      (err: unknown) => {
        for (const t of takes) t.reject(err);
      },
    );
  };

  // The first take of a moment leaves at once, alone (a take in a turn of its own, most takes
  // where writers repeat, waits for nothing); on standalone, those asked after it in the same
  // moment queue and leave together at its end.
  let momentOpen = false;
  const endMoment = (): void => {
    momentOpen = false;
    const takes = queued;
    if (takes.length === 0) return;
    queued = [];
    for (let i = 0; i < takes.length; i += MAX_TAKES_PER_CALL) {
      sendTakes(takes.slice(i, i + MAX_TAKES_PER_CALL));
    }
  };

  return {
    take(key, want, limit, windowMs, bounds = {}) {
      const need = bounds.need ?? Math.min(1, want);
      const divisor = bounds.divisor ?? 1;
      const invalid =
        notCount('want', want) ??
        notCount('limit', limit) ??
        notCount('windowMs', windowMs) ??
        notCount('need', need) ??
        (need > want ? new RangeError('need must not exceed want') : undefined) ??
        (divisor >= 1 ? undefined : new RangeError('divisor must be >= 1'));
      if (invalid) return Promise.reject(invalid);
      const args = [String(want), String(limit), String(windowMs), String(need), String(divisor)];
      return new Promise<Lease>((resolve, reject) => {
        if (momentOpen) {
          queued.push({ key, args, resolve, reject });
          return;
        }
        if (!cluster) {
          momentOpen = true;
          queueMicrotask(endMoment);
        }
        sendTakes([{ key, args, resolve, reject }]);
      });
    },
    async giveBack(key, points, msLeft, slackMs) {
      if (points <= 0 || msLeft <= slackMs) return 0;
      const args = [Math.floor(points), Math.ceil(slackMs), Math.ceil(msLeft + slackMs)];
      const n = await storeCall('lease giveBack', () =>
        run('sluiceLeaseGiveBack', [key], args.map(String)),
      );
      return Number(n);
    },
  };
}
