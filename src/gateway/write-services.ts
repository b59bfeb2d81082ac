/**
 * The services the write checks use, made once per gateway from its context: the charger, the
 * seen ids, the per-author headroom and per-address failed checks, the settlement's claims.
 */
import { EventPolicy } from '../nostr/event-policy.js';
import { eventIdMatches, verifySignature } from '../nostr/frames.js';
import { Charger } from '../quota/charger.js';
import { Headroom } from '../quota/headroom.js';
import { WindowCounters } from '../util/window-counters.js';
import { EarlyRetries } from '../write/early-retries.js';
import { SeenIds, claimMs } from '../write/seen-ids.js';
import type { SettleServices } from '../write/ticket.js';
import type { WriteServices } from '../write/write-state.js';
import type { GatewayContext } from './context.js';

/** What the write path reads from the gateway: built before it, so no cycle and no cast. */
export type AdmissionServices = Pick<
  GatewayContext,
  'config' | 'store' | 'policy' | 'decider' | 'pool' | 'metrics' | 'log' | 'admittedTally' | 'board'
>;

export function writeServices(ctx: AdmissionServices, now: () => number): WriteServices {
  const { maxTrackedClients } = ctx.config.limits;
  const seen = new SeenIds(maxTrackedClients, {
    kv: () => ctx.store.kv,
    down: () => ctx.decider.storeDown,
    keyPrefix: () => ctx.config.quotas.keyPrefix,
  });
  const countFrame = (type: string) => ctx.metrics.countFrame(type);
  return {
    config: () => ctx.config,
    policy: ctx.policy,
    charger: new Charger(() => ctx.decider, ctx.policy, ctx.metrics, ctx.log),
    seen,
    headroom: new Headroom(maxTrackedClients, now),
    failedChecks: new WindowCounters(maxTrackedClients, now),
    earlyRetries: new EarlyRetries(maxTrackedClients, now),
    eventPolicy: new EventPolicy(ctx.config.nostr),
    verify: verifySignature,
    hashMatches: eventIdMatches,
    settle: settleServices(ctx, seen, now, countFrame),
    countFrame,
    multiplier: (nodeId) => ctx.board.get(nodeId).value,
    forwarded: (nodeId, bytes, cost) => ctx.admittedTally?.note(nodeId, bytes, cost),
    now,
  };
}

function settleServices(
  ctx: AdmissionServices,
  seen: SeenIds,
  now: () => number,
  countFrame: (type: string) => void,
): SettleServices {
  return {
    async claim(event, shared, policy) {
      const { config } = ctx;
      // The tier alone: the author's hashed key is not needed to find its window.
      const windowSec = policy.limitOf(policy.tierOfAuthor(event.pubkey), 'write')?.windowSec;
      if (!windowSec) return;
      const ms = claimMs(windowSec, event.created_at, Math.floor(now() / 1000));
      await seen.claim(event.id, ms, shared && config.quotas.enabled);
    },
    verify: verifySignature,
    countInvalid: () => countFrame('INVALID_SIGNATURE'),
    settled: (event) => seen.settled(event),
  };
}
