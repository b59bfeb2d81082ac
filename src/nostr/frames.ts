import { validateEvent } from 'nostr-tools/pure';
import type { Event } from 'nostr-tools/pure';

/** A client frame, parsed just enough for a per-frame decision. */
export type ClientFrame =
  /** Well-formed; its id and signature are not checked yet (see `verifySignature`). */
  | { type: 'EVENT'; event: Event }
  /** An EVENT that cannot be accepted: answered with OK false "invalid:". */
  | { type: 'BAD_EVENT'; id: string; reason: string }
  /** `filters`: how many filters follow the subscription id (not parsed here). */
  | { type: 'REQ' | 'COUNT'; subId: string; filters: number }
  /** `subId` when it is a string a REQ could have opened (1-64 characters). */
  | { type: 'CLOSE'; verb: string; subId?: string }
  /** `event`: the AUTH event as sent, not checked (the gateway checks it only under NIP-42). */
  | { type: 'AUTH'; verb: string; event: unknown }
  | { type: 'OTHER'; verb: string }
  /** Not a NIP-01 message at all: answered with NOTICE. */
  | { type: 'MALFORMED'; reason: string };

const HEX64 = /^[0-9a-f]{64}$/;
const HEX128 = /^[0-9a-f]{128}$/;

/**
 * Pull an event id out of a frame too large to accept, so its EVENT can still be answered.
 * A bare `"id":"<hex>"` can only be a key of the event object: JSON strings cannot hold
 * unescaped quotes, and NIP-01 events nest no other objects. The frame is already bounded
 * by the socket's maximum payload.
 */
export function sniffEventId(text: string): string | undefined {
  if (!/^\s*\[\s*"EVENT"/.test(text.slice(0, 64))) return undefined;
  return /"id"\s*:\s*"([0-9a-f]{64})"/.exec(text)?.[1];
}

/**
 * Parse one text frame from a client, structure only: verifying a signature is dear, so the
 * admission step charges the sender before it calls `verifySignature`.
 */
export function parseClientFrame(text: string): ClientFrame {
  let msg: unknown;
  try {
    msg = JSON.parse(text);
  } catch {
    return { type: 'MALFORMED', reason: 'frame is not valid JSON' };
  }
  if (!Array.isArray(msg) || msg.length === 0 || typeof msg[0] !== 'string') {
    return { type: 'MALFORMED', reason: 'a message must be a JSON array starting with a verb' };
  }
  const verb = msg[0];
  switch (verb) {
    case 'EVENT':
      return parseEvent(msg[1]);
    case 'REQ':
    case 'COUNT':
      if (typeof msg[1] !== 'string' || msg[1].length === 0 || msg[1].length > 64) {
        return { type: 'MALFORMED', reason: `${verb} needs a subscription id of 1-64 characters` };
      }
      return { type: verb, subId: msg[1], filters: msg.length - 2 };
    case 'CLOSE':
      return typeof msg[1] === 'string' && msg[1].length > 0 && msg[1].length <= 64
        ? { type: verb, verb, subId: msg[1] }
        : { type: verb, verb };
    case 'AUTH':
      return { type: verb, verb, event: msg[1] };
    default:
      return { type: 'OTHER', verb };
  }
}

/** An event object, well-formed (NIP-01 fields and types) or not: EVENT or BAD_EVENT. */
export function parseEvent(
  raw: unknown,
): Extract<ClientFrame, { type: 'EVENT' }> | Extract<ClientFrame, { type: 'BAD_EVENT' }> {
  const id =
    raw && typeof raw === 'object' && typeof (raw as { id?: unknown }).id === 'string'
      ? (raw as { id: string }).id
      : '';
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) {
    return { type: 'BAD_EVENT', id, reason: 'EVENT needs an event object' };
  }
  const event = raw as Event;
  if (!validateEvent(event) || !HEX64.test(event.id ?? '') || typeof event.sig !== 'string') {
    return { type: 'BAD_EVENT', id, reason: 'malformed event (fields or types)' };
  }
  // One encoding only, the one relays store: a copy in another case would verify here and
  // be refused by the relay (and charged, or claimed, for nothing).
  if (!HEX64.test(event.pubkey) || !HEX128.test(event.sig)) {
    return { type: 'BAD_EVENT', id, reason: 'pubkey and sig must be lowercase hex' };
  }
  return { type: 'EVENT', event };
}

/** The event id is the hash of its content and the signature is the pubkey's over that id. */
export { eventIdMatches, initSignatureVerifier, verifySignature } from './verify.js';
