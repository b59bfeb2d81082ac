/**
 * NIP-42 as the gateway follows it on one connection (nostr.publicUrl set): the challenge the
 * relay sent, the AUTH events the gateway checked and forwarded, awaiting the relay's OK, and
 * the pubkey bound once the relay accepts one. All bounded per connection.
 */
import { MAX_CHALLENGE_LENGTH } from '../nostr/nip42.js';

/** AUTH events a connection may have checked (signature included) before it is refused. */
export const MAX_AUTH_ATTEMPTS = 8;

export interface ConnectionAuth {
  /** The relay's latest `["AUTH", <challenge>]` on this connection. */
  challenge?: string;
  /** AUTH event id -> its pubkey, checked by the gateway and awaiting the relay's OK. */
  pending: Map<string, string>;
  /** AUTH events checked so far (each costs a signature verification). */
  attempts: number;
}

export function newConnectionAuth(): ConnectionAuth {
  return { pending: new Map(), attempts: 0 };
}

/** The head of a relay's `["AUTH", "<challenge>"]`. */
const AUTH_HEAD = /^\s*\[\s*"AUTH"\s*,\s*"/;
/** A challenge message is short: a longer one is not parsed (nor kept). */
const MAX_CHALLENGE_MESSAGE_BYTES = 2 * MAX_CHALLENGE_LENGTH;

/**
 * The challenge of a relay message `["AUTH", "<challenge>"]`, or undefined for any other
 * message. `head` is the message's first bytes (latin1), already decoded by the caller.
 */
export function challengeIn(head: string, data: Buffer): string | undefined {
  if (!AUTH_HEAD.test(head) || data.length > MAX_CHALLENGE_MESSAGE_BYTES) return undefined;
  try {
    const msg: unknown = JSON.parse(data.toString('utf8'));
    if (!Array.isArray(msg) || typeof msg[1] !== 'string') return undefined;
    return msg[1].length > 0 && msg[1].length <= MAX_CHALLENGE_LENGTH ? msg[1] : undefined;
  } catch {
    return undefined;
  }
}
