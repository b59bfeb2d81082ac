/**
 * What the gateway says when it refuses a Nostr message, in one module: each text starts with
 * its NIP-01 machine-readable prefix, and either names when to retry (`retry in Ns`, where a
 * retry can pass) or what would pass instead (AUTH, fewer filters, more work), or why no retry
 * of the same message passes. Quota refusals are worded in quota/responses.ts (they carry the
 * numbers of a decision); REFUSALS below lists those too, so one table holds every answer.
 */

/** Whole seconds to wait for `ms` to pass: rounded up, at least 1 (never "retry in 0s"). */
export function retrySec(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000));
}

export function retryIn(sec: number): string {
  return `retry in ${sec}s`;
}

/** Past limits.framesPerSecPerAddress: the address's window ends in `sec`. */
export const frameRateRefusal = (sec: number) =>
  `rate-limited: too many messages from this address; ${retryIn(sec)}`;

/** A write sent again before the time its refusal gave (see write/early-retries.ts). */
export const earlyRetryRefusal = (sec: number) =>
  `rate-limited: sent again before the time given; ${retryIn(sec)}`;

/** A write whose cost is more than its whole quota (nostr.costs against quotas.tiers). */
export const costsMoreThanQuota = (cost: number, limit: number, windowSec: number) =>
  `rate-limited: this write costs ${cost} points, more than the whole write quota of ${limit} per ${windowSec}s; no retry passes`;

/**
 * Over HTTP, a request whose cost is more than its whole quota (quotas.routes' cost against
 * quotas.tiers, or a range's): 403, no Retry-After.
 */
export const costsMoreThanQuotaDetail = (
  noun: string,
  cost: number,
  limit: number,
  windowSec: number,
) =>
  `this ${noun} costs ${cost} points, more than the whole ${noun} quota of ${limit} per ${windowSec} s; no retry passes as sent`;

/** The close that ends a bouncer: past limits.earlyRetries.max early retries. */
export const EARLY_RETRY_CLOSE = 'rate-limited: writes sent again before the time given';

/**
 * Over HTTP, the answer that ends a bouncer's connection (429, `Connection: close`): the write
 * itself may pass at its time, from a new connection.
 */
export const earlyRetryCloseRefusal = (sec: number) =>
  `${EARLY_RETRY_CLOSE}; ${retryIn(sec)} from a new connection; closing this one`;

/** The connection's awaited events (count or bytes) are at their bound: the relay answers soon. */
export const AWAITING_REFUSAL = `rate-limited: too many events awaiting the relay's answer on this connection; ${retryIn(1)}`;

/** A quota the gateway cannot check (the store failed, fail closed): its own failure, shortly over. */
export const STORE_ERROR_REFUSAL = `error: quotas cannot be checked right now; ${retryIn(1)}`;

/** A frame whose handling threw: the gateway's failure, not the client's. */
export const GATEWAY_ERROR_NOTICE = `error: the gateway could not process this message; ${retryIn(1)}`;

export const BINARY_FRAME_REFUSAL = 'invalid: binary frames are not part of NIP-01; send text';

export const oversizedRefusal = (bytes: number, max: number) =>
  `invalid: message of ${bytes} bytes exceeds the limit of ${max} bytes`;

/** A frame or event that is not well-formed NIP-01 (the parser's reason). */
export const malformedRefusal = (reason: string) => `invalid: ${reason}`;

export const SIGNATURE_REFUSAL = 'invalid: event id or signature does not verify';
export const ID_REFUSAL = 'invalid: event id does not match its content';

export const blockedKindRefusal = (kind: number) =>
  `blocked: events of kind ${kind} are not accepted here`;

export const powRefusal = (work: number, min: number) =>
  `pow: difficulty ${work} is below the required ${min}; mine at least ${min} bits (NIP-13)`;

/** nostr.pow.adaptive: the work asked while the relay is under load (write/checks.ts). */
export const adaptiveWorkRefusal = (required: number, work: number) =>
  `pow: difficulty ${required} is asked while this relay is under load (this event has ` +
  `${work}); add proof of work (NIP-13), or write as a member`;

export const AUTH_REQUIRED_REFUSAL =
  'auth-required: authenticate (NIP-42 AUTH) before writing to this relay';

export const filtersRefusal = (max: number, type: string) =>
  `restricted: at most ${max} filters per ${type}`;

export const subscriptionsRefusal = (max: number) =>
  `restricted: at most ${max} open subscriptions per connection; CLOSE one first`;

export const NO_CHALLENGE_REFUSAL = 'restricted: no AUTH challenge was sent on this connection';
export const OTHER_PUBKEY_REFUSAL =
  'restricted: this connection is authenticated as another pubkey already';
export const authAttemptsRefusal = (max: number) =>
  `restricted: at most ${max} AUTH attempts per connection`;

export const AWAITED_HERE_DUPLICATE =
  "duplicate: this event was sent on this connection and awaits the relay's answer";
export const IN_FLIGHT_DUPLICATE =
  'duplicate: this event is in flight through this gateway; send it again if it is refused';

/** The NOTICE before the gateway closes a connection for its policy (the reason says why). */
export const closingNotice = (reason: string) =>
  reason.startsWith('rate-limited:')
    ? `${reason}; closing the connection`
    : `restricted: ${reason}; closing the connection`;

/** Whether a retry of the same message can pass, and when or what instead. */
export type Remedy =
  /** Carries `retry in Ns`: the same message can pass after that. */
  | { retry: 'timed' }
  /** No time: the same message never passes; `passes` says what would (or why nothing). */
  | { retry: 'never'; passes: string };

export interface RefusalEntry {
  name: string;
  /** How it is sent: an OK false, a CLOSED, a NOTICE, a close, or an HTTP status. */
  sent: 'OK' | 'CLOSED' | 'NOTICE' | 'close' | `HTTP ${number}`;
  /** One text as sent (HTTP: the problem's detail), for the table and its test. */
  example: string;
  remedy: Remedy;
}

const timed: Remedy = { retry: 'timed' };
const never = (passes: string): Remedy => ({ retry: 'never', passes });

/**
 * Every refusal the gateway sends, by the path that sends it (docs/NOSTR.md, "Answers clients
 * can act on", is this table in words). test/unit/nostr/refusals.test.ts holds each to its
 * remedy and each NIP-01 refusal text in the source to an entry here.
 */
export const REFUSALS: readonly RefusalEntry[] = [
  { name: 'frame-rate', sent: 'OK', example: frameRateRefusal(1), remedy: timed },
  {
    name: 'quota',
    sent: 'OK',
    example: 'rate-limited: write quota of 60 per 60s used up; retry in 12s',
    remedy: timed,
  },
  {
    name: 'quota-auth-lifts',
    sent: 'OK',
    example:
      'rate-limited: write quota of 60 per 60s used up; retry in 12s, or AUTH (NIP-42) as a listed pubkey',
    remedy: timed,
  },
  {
    name: 'costs-more-than-quota',
    sent: 'OK',
    example: costsMoreThanQuota(20, 10, 60),
    remedy: never('a cheaper write (another kind, a smaller one, or proof of work)'),
  },
  {
    name: 'pressure',
    sent: 'OK',
    example: 'rate-limited: relay under memory pressure, retry in 3s',
    remedy: timed,
  },
  {
    name: 'capacity',
    sent: 'OK',
    example: 'rate-limited: the relay is short of capacity and takes no writes now; retry in 2s',
    remedy: timed,
  },
  {
    name: 'read-quota',
    sent: 'CLOSED',
    example: 'rate-limited: write quota of 100 per 60s used up; retry in 4s',
    remedy: timed,
  },
  { name: 'early-retry', sent: 'OK', example: earlyRetryRefusal(9), remedy: timed },
  {
    name: 'early-retry-close',
    sent: 'close',
    example: closingNotice(EARLY_RETRY_CLOSE),
    remedy: never('reconnect, and send each write again only after its retry time'),
  },
  { name: 'awaiting', sent: 'OK', example: AWAITING_REFUSAL, remedy: timed },
  { name: 'store-error', sent: 'OK', example: STORE_ERROR_REFUSAL, remedy: timed },
  { name: 'gateway-error', sent: 'NOTICE', example: GATEWAY_ERROR_NOTICE, remedy: timed },
  {
    name: 'binary',
    sent: 'NOTICE',
    example: BINARY_FRAME_REFUSAL,
    remedy: never('the same message as text'),
  },
  {
    name: 'oversized',
    sent: 'OK',
    example: oversizedRefusal(200_000, 131_072),
    remedy: never('a message within the limit'),
  },
  {
    name: 'malformed',
    sent: 'NOTICE',
    example: malformedRefusal('not a JSON array'),
    remedy: never('a well-formed NIP-01 message'),
  },
  {
    name: 'bad-event',
    sent: 'OK',
    example: malformedRefusal('id is not 64 lowercase hex'),
    remedy: never('a well-formed event'),
  },
  {
    name: 'signature',
    sent: 'OK',
    example: SIGNATURE_REFUSAL,
    remedy: never('a correctly signed event'),
  },
  { name: 'id', sent: 'OK', example: ID_REFUSAL, remedy: never('an id that is its hash') },
  {
    name: 'auth-event',
    sent: 'OK',
    example: malformedRefusal('the challenge tag is not the challenge of this connection'),
    remedy: never('an AUTH event that answers this connection'),
  },
  {
    name: 'blocked',
    sent: 'OK',
    example: blockedKindRefusal(4),
    remedy: never('another kind: this one is never accepted'),
  },
  {
    name: 'pow',
    sent: 'OK',
    example: powRefusal(3, 20),
    remedy: never('the same content mined to the difficulty named'),
  },
  {
    name: 'adaptive-work',
    sent: 'OK',
    example: adaptiveWorkRefusal(12, 0),
    remedy: never('the same content mined to the difficulty named, or a member'),
  },
  {
    name: 'auth-required',
    sent: 'OK',
    example: AUTH_REQUIRED_REFUSAL,
    remedy: never('the same write after AUTH'),
  },
  {
    name: 'filters',
    sent: 'CLOSED',
    example: filtersRefusal(10, 'REQ'),
    remedy: never('fewer filters'),
  },
  {
    name: 'subscriptions',
    sent: 'CLOSED',
    example: subscriptionsRefusal(20),
    remedy: never('a CLOSE of another subscription first'),
  },
  {
    name: 'no-challenge',
    sent: 'OK',
    example: NO_CHALLENGE_REFUSAL,
    remedy: never('AUTH after a challenge'),
  },
  {
    name: 'other-pubkey',
    sent: 'OK',
    example: OTHER_PUBKEY_REFUSAL,
    remedy: never('another connection for another pubkey'),
  },
  {
    name: 'auth-attempts',
    sent: 'OK',
    example: authAttemptsRefusal(8),
    remedy: never('a new connection'),
  },
  {
    name: 'awaited-here',
    sent: 'OK',
    example: AWAITED_HERE_DUPLICATE,
    remedy: never("nothing: the relay's answer to the first copy decides"),
  },
  {
    name: 'in-flight',
    sent: 'OK',
    example: IN_FLIGHT_DUPLICATE,
    remedy: never('the same event again only if its other copy is refused'),
  },
  {
    name: 'invalid-close',
    sent: 'close',
    example: closingNotice('too many events that do not verify'),
    remedy: never('a new connection that sends events that verify'),
  },
  {
    name: 'http-quota',
    sent: 'HTTP 429',
    example: 'write quota of 60 per 60 s used up for this client; retry in 12 s',
    remedy: timed,
  },
  {
    name: 'http-capacity',
    sent: 'HTTP 503',
    example: 'the relay node is short of capacity and takes no writes now; retry in 2 s',
    remedy: timed,
  },
  {
    name: 'http-store',
    sent: 'HTTP 503',
    example: 'quotas cannot be checked right now (the quota store is unreachable); retry in 1 s',
    remedy: timed,
  },
  {
    name: 'http-no-relay',
    sent: 'HTTP 503',
    example: 'no relay node is available; retry in 1 s',
    remedy: timed,
  },
  {
    name: 'http-early-retry',
    sent: 'HTTP 429',
    example: earlyRetryRefusal(9),
    remedy: timed,
  },
  {
    name: 'http-early-retry-close',
    sent: 'HTTP 429',
    example: earlyRetryCloseRefusal(9),
    remedy: timed,
  },
  {
    name: 'http-costs-more-than-quota',
    sent: 'HTTP 403',
    example: costsMoreThanQuotaDetail('write', 20, 10, 60),
    remedy: never('a cheaper request (another route or a smaller event), or a larger tier'),
  },
  {
    name: 'http-connections',
    sent: 'HTTP 429',
    example: 'at most 256 WebSocket connections per client address; retry in 1 s',
    remedy: timed,
  },
  {
    name: 'http-nip11-busy',
    sent: 'HTTP 503',
    example: 'too many relay information documents are being fetched; retry in 1 s',
    remedy: timed,
  },
  {
    name: 'http-event',
    sent: 'HTTP 400',
    example: malformedRefusal('the body is not JSON'),
    remedy: never('a well-formed, correctly signed event'),
  },
  {
    name: 'http-event-refused',
    sent: 'HTTP 403',
    example: blockedKindRefusal(4),
    remedy: never('as its NIP-01 text says (blocked:, pow:, auth-required:, duplicate:)'),
  },
  {
    name: 'http-target',
    sent: 'HTTP 400',
    example: 'the request target is not usable',
    remedy: never('a usable request target'),
  },
  {
    name: 'http-denied',
    sent: 'HTTP 404',
    example: 'no such resource',
    remedy: never('another path'),
  },
  {
    name: 'http-body',
    sent: 'HTTP 413',
    example: 'request bodies are limited to 1048576 bytes',
    remedy: never('a smaller body'),
  },
];

/** The `retry in Ns` a text carries, in seconds (undefined when it carries none). */
export function retryInSec(text: string): number | undefined {
  const m = /retry in (\d+) ?s\b/.exec(text);
  return m ? Number(m[1]) : undefined;
}
