/**
 * The NIP-11 relay information document as clients of the gateway see it: the relay's own,
 * with the gateway's limits merged into `limitation` (the stricter of the two wherever both
 * set one). Pure: the fetching is in relay-info.ts.
 */
import type { GatewayConfig } from '../config/schema.js';

/**
 * Settings another part of the gateway may define (NIP-13 proof of work, NIP-42 AUTH,
 * subscription caps): read where the configuration has them, ignored where it has not.
 */
interface NostrWritePolicy {
  pow?: { minDifficulty?: number };
  authRequiredForWrites?: boolean;
  maxSubscriptions?: number;
}

/** What of the gateway's configuration the document shows. */
export interface GatewayLimits {
  /** limits.maxFrameBytes: the largest message the gateway passes on. */
  maxFrameBytes: number;
  nostr: GatewayConfig['nostr'];
  /**
   * The difficulty asked now of authors without a tier (nostr.pow.adaptive, the node's
   * multiplier below 1), when above nostr.pow.minDifficulty.
   */
  powInForce?: number;
  /** The default tier's write quota in force on the node, when quotas are on. */
  writeQuota?: CurrentQuota;
  /**
   * The node's write budget in force (the learned one, capped by upstreams[].writeBudget),
   * when it has one and quotas are on.
   */
  nodeBudget?: CurrentQuota & { inForce: boolean };
}

/** A quota as in force now: points per window at the node's multiplier, and its base. */
export interface CurrentQuota {
  points: number;
  windowSec: number;
  basePoints: number;
  multiplier: number;
}

/**
 * Vendor key of the default tier's write quota in force (NIP-11 has no field for rates):
 * base x the node's current multiplier, with both.
 */
export const WRITE_QUOTA_KEY = 'sluice_write_quota';
/**
 * Vendor key of the node's write budget, for all clients together: in force (`in_force`)
 * only while the node's multiplier is below 1.
 */
export const NODE_BUDGET_KEY = 'sluice_node_write_budget';

function positiveNumber(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) && value > 0 ? value : undefined;
}

/** The smaller of two bounds, either of which may be absent. */
function stricter(relay: unknown, gateway: number | undefined): number | undefined {
  const ours = positiveNumber(gateway);
  const theirs = positiveNumber(relay);
  if (ours === undefined) return theirs;
  return theirs === undefined ? ours : Math.min(ours, theirs);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The relay's document with the gateway's limits merged into `limitation`. */
export function mergeRelayInfo(
  relayDoc: Record<string, unknown>,
  gateway: GatewayLimits,
): Record<string, unknown> {
  const limitation: Record<string, unknown> = isRecord(relayDoc.limitation)
    ? { ...relayDoc.limitation }
    : {};
  limitation.max_message_length = stricter(limitation.max_message_length, gateway.maxFrameBytes);

  const policy = gateway.nostr as NostrWritePolicy;
  const pow = positiveNumber(Math.max(policy.pow?.minDifficulty ?? 0, gateway.powInForce ?? 0));
  if (pow !== undefined) {
    // The higher difficulty is the stricter one.
    limitation.min_pow_difficulty = Math.max(
      pow,
      positiveNumber(limitation.min_pow_difficulty) ?? 0,
    );
  }
  if (policy.authRequiredForWrites === true) {
    limitation.auth_required = true;
    limitation.restricted_writes = true;
  }
  const subscriptions = stricter(limitation.max_subscriptions, policy.maxSubscriptions);
  if (subscriptions !== undefined) limitation.max_subscriptions = subscriptions;

  const merged: Record<string, unknown> = { ...relayDoc, limitation };
  if (gateway.writeQuota) merged[WRITE_QUOTA_KEY] = quotaFields(gateway.writeQuota);
  if (gateway.nodeBudget) {
    merged[NODE_BUDGET_KEY] = {
      ...quotaFields(gateway.nodeBudget),
      in_force: gateway.nodeBudget.inForce,
    };
  }
  return merged;
}

function quotaFields(q: CurrentQuota): Record<string, number> {
  return {
    points: q.points,
    window_sec: q.windowSec,
    base_points: q.basePoints,
    multiplier: q.multiplier,
  };
}
