import type { QuotaDecision } from './decider.js';

/**
 * RateLimit-Policy and RateLimit as structured-field lists (IETF httpapi ratelimit-headers,
 * revisions 08-10): the policy name, q quota, w window, r remaining, t seconds until more.
 * The limit shown is the effective one (base x multiplier): servers may lower it at will.
 */
export function rateLimitHeaders(d: QuotaDecision): Record<string, string> {
  const headers: Record<string, string> = {
    'ratelimit-policy': `"${d.policy}";q=${d.limit};w=${d.windowSec}`,
    ratelimit: `"${d.policy}";r=${d.remaining};t=${d.resetSec}`,
  };
  if (!d.admitted) headers['retry-after'] = String(Math.max(1, d.resetSec));
  return headers;
}

export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  policy?: string;
  retryAfter?: number;
}

/** The application/problem+json body of a 429. */
export function rateLimitedProblem(d: QuotaDecision): Problem {
  const noun = d.policy === 'writes' ? 'write' : 'read';
  return {
    type: 'urn:sluice:problem:rate-limited',
    title: 'Too Many Requests',
    status: 429,
    detail: `${noun} quota of ${d.limit} per ${d.windowSec} s used up for this client; retry in ${Math.max(1, d.resetSec)} s`,
    policy: d.policy,
    retryAfter: Math.max(1, d.resetSec),
  };
}

/** The body of a 503 when quotas cannot be checked and the gateway fails closed. */
export function unavailableProblem(): Problem {
  return {
    type: 'urn:sluice:problem:temporarily-reduced-capacity',
    title: 'Service Unavailable',
    status: 503,
    detail: 'quotas cannot be checked right now (the quota store is unreachable); retry shortly',
    retryAfter: 1,
  };
}

/** The NIP-01 OK message of a rejected EVENT: machine-readable prefix, then when to retry. */
export function nostrRejection(d: QuotaDecision): string {
  if (d.outcome === 'error') return 'error: quotas cannot be checked right now; retry shortly';
  return `rate-limited: write quota of ${d.limit} per ${d.windowSec}s used up; retry in ${Math.max(1, d.resetSec)}s`;
}
