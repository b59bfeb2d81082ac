import type { QuotaDecision } from './decider.js';
import { STORE_ERROR_REFUSAL } from '../nostr/refusals.js';
import { NODE_BUDGET_POLICY } from './node-budget.js';

/**
 * What clients are told of quotas, in one module: the header fields and problem types of
 * draft-ietf-httpapi-ratelimit-headers-11 (revisions 08-11 share the syntax; a later one may
 * rename parameters, and this is the one place to follow it), and the NIP-01 OK messages.
 */

/** Problem types registered by the draft (in IANA's HTTP Problem Types registry). */
const PROBLEM_TYPES = 'https://iana.org/assignments/http-problem-types';
export const QUOTA_EXCEEDED = `${PROBLEM_TYPES}#quota-exceeded`;
export const TEMPORARY_REDUCED_CAPACITY = `${PROBLEM_TYPES}#temporary-reduced-capacity`;

export interface HeaderOptions {
  /** Also send X-RateLimit-Limit / -Remaining / -Reset (quotas.headers.legacy). */
  legacy?: boolean;
}

/** Seconds a refused client is asked to wait: never earlier than `t`, and at least 1. */
export function retryAfterSec(d: QuotaDecision): number {
  return Math.max(1, d.resetSec);
}

/**
 * RateLimit-Policy and RateLimit as structured-field lists: the policy name, q quota, w
 * window, r remaining, t seconds until more. The limit shown is the effective one (base x
 * multiplier): servers may lower it at will. With `node` (a write charged to its relay node's
 * budget under pressure) both lists carry a second item, "node-budget"; Retry-After and the
 * legacy fields follow the one that refused (else the client's). The legacy X-RateLimit-*
 * fields carry the same numbers (Reset in seconds from now, as t).
 */
export function rateLimitHeaders(
  d: QuotaDecision,
  options: HeaderOptions = {},
  node?: QuotaDecision,
): Record<string, string> {
  let policy = `"${d.policy}";q=${d.limit};w=${d.windowSec}`;
  let state = `"${d.policy}";r=${d.remaining};t=${d.resetSec}`;
  let binding = d;
  if (node) {
    policy += `, "${node.policy}";q=${node.limit};w=${node.windowSec}`;
    state += `, "${node.policy}";r=${node.remaining};t=${node.resetSec}`;
    if (d.admitted && !node.admitted) binding = node;
  }
  const headers: Record<string, string> = { 'ratelimit-policy': policy, ratelimit: state };
  if (!binding.admitted) headers['retry-after'] = String(retryAfterSec(binding));
  if (options.legacy) {
    headers['x-ratelimit-limit'] = String(binding.limit);
    headers['x-ratelimit-remaining'] = String(binding.remaining);
    headers['x-ratelimit-reset'] = String(binding.resetSec);
  }
  return headers;
}

export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  /** The draft's extension member: names of the policies whose quota was exceeded. */
  'violated-policies'?: string[];
  retryAfter?: number;
}

/** A write refused because the node's pressure multiplier is 0: no quota is left for anyone. */
export function isCapacityRefusal(d: QuotaDecision): boolean {
  return !d.admitted && d.outcome !== 'error' && d.multiplier === 0;
}

/**
 * A write refused by a rate limit while its node's multiplier is below 1 (and above 0): the
 * client's lowered cap or the node's budget. Clients are told the relay is under memory
 * pressure, so that well-written ones back off rather than retry into the flood.
 */
export function isPressureRefusal(d: QuotaDecision): boolean {
  return (
    !d.admitted &&
    d.outcome !== 'error' &&
    d.multiplier > 0 &&
    d.multiplier < 1 &&
    (d.policy === 'writes' || d.policy === NODE_BUDGET_POLICY)
  );
}

/** The application/problem+json body of a refusal by quota: 429, or 503 at multiplier 0. */
export function quotaProblem(d: QuotaDecision): Problem {
  const noun = d.policy === 'reads' ? 'read' : 'write';
  const retryAfter = retryAfterSec(d);
  if (isCapacityRefusal(d)) {
    return {
      type: TEMPORARY_REDUCED_CAPACITY,
      title: 'Service Unavailable',
      status: 503,
      detail: `the relay node is short of capacity and takes no ${noun}s now; retry in ${retryAfter} s`,
      'violated-policies': [d.policy],
      retryAfter,
    };
  }
  return {
    type: QUOTA_EXCEEDED,
    title: 'Too Many Requests',
    status: 429,
    detail: `${quotaDetail(d, noun)}; retry in ${retryAfter} s`,
    'violated-policies': [d.policy],
    retryAfter,
  };
}

/** What was used up, in words, saying so when the relay is under memory pressure. */
function quotaDetail(d: QuotaDecision, noun: string): string {
  if (d.policy === NODE_BUDGET_POLICY) {
    return `relay under memory pressure: the relay node's write budget of ${d.limit} per ${d.windowSec} s, for all clients together, is used up`;
  }
  const used = `${noun} quota of ${d.limit} per ${d.windowSec} s used up for this client`;
  return isPressureRefusal(d)
    ? `relay under memory pressure: ${used} (lowered while the pressure lasts)`
    : used;
}

/** A problem type of the gateway's own: the request's cost is more than a whole quota. */
export const COST_EXCEEDS_QUOTA = 'urn:sluice:problem:cost-exceeds-quota';

/**
 * A request no wait lets pass (its cost is more than the whole quota of one it is charged
 * to): 403, as a refusal by policy is, and no Retry-After. Not 429, which clients and their
 * libraries retry on (its RFC 6585 meaning is "too many requests in a given amount of time");
 * not 413, which is about the body's size. RateLimit-Policy names the quota it exceeds.
 */
export function costExceedsQuota(
  detail: string,
  cls: 'write' | 'read',
  limit: { points: number; windowSec: number },
): { problem: Problem; headers: Record<string, string> } {
  const policy = cls === 'write' ? 'writes' : 'reads';
  return {
    problem: {
      type: COST_EXCEEDS_QUOTA,
      title: 'Forbidden',
      status: 403,
      detail,
      'violated-policies': [policy],
    },
    headers: { 'ratelimit-policy': `"${policy}";q=${limit.points};w=${limit.windowSec}` },
  };
}

/** The body of a 503 when quotas cannot be checked and the gateway fails closed. */
export function storeUnavailableProblem(): Problem {
  return {
    type: 'urn:sluice:problem:quota-store-unavailable',
    title: 'Service Unavailable',
    status: 503,
    detail: 'quotas cannot be checked right now (the quota store is unreachable); retry in 1 s',
    retryAfter: 1,
  };
}

/**
 * The NIP-01 OK message of a rejected EVENT: machine-readable prefix, then when to retry, and
 * `orElse`, what would pass sooner (AUTH as a listed pubkey), when there is such a thing.
 */
export function nostrRejection(d: QuotaDecision, orElse?: string): string {
  if (d.outcome === 'error') return STORE_ERROR_REFUSAL;
  const retry = `retry in ${retryAfterSec(d)}s${orElse ? `, or ${orElse}` : ''}`;
  if (isCapacityRefusal(d)) {
    return `rate-limited: the relay is short of capacity and takes no writes now; ${retry}`;
  }
  if (isPressureRefusal(d)) return `rate-limited: relay under memory pressure, ${retry}`;
  return `rate-limited: write quota of ${d.limit} per ${d.windowSec}s used up; ${retry}`;
}
