import type { ClientConnection, ScriptRunner } from './clients/driver.js';
import { storeCall } from './errors.js';

/**
 * Which gateway processes took for one set of quotas lately: a sorted set of process ids
 * scored by their last heartbeat, on Valkey's own clock (so the gateways' clocks never
 * matter). An id stays `retainMs` after its last heartbeat: a process that stopped or
 * crashed still counts until every window it could have taken in has ended.
 */
const BEAT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local retain = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - retain)
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('PEXPIRE', KEYS[1], retain)
return redis.call('ZCARD', KEYS[1]) - 1
`;

const SCRIPTS = { sluicePresenceBeat: BEAT };

export interface PresenceStore {
  /**
   * Record a heartbeat of process `id` and forget those older than `retainMs`: resolves to
   * how many other processes beat within `retainMs`.
   */
  beat(key: string, id: string, retainMs: number): Promise<number>;
}

/** The script is registered on first use: a gateway that never asks never loads it. */
export function presenceStore(conn: Pick<ClientConnection, 'scripts'>): PresenceStore {
  let cached: ScriptRunner<keyof typeof SCRIPTS> | undefined;
  return {
    async beat(key, id, retainMs) {
      if (!Number.isInteger(retainMs) || retainMs < 1) {
        throw new RangeError('retainMs must be an integer >= 1');
      }
      const reply = await storeCall('presence beat', () =>
        (cached ??= conn.scripts(SCRIPTS))('sluicePresenceBeat', [key], [id, String(retainMs)]),
      );
      return Number(reply);
    },
  };
}
