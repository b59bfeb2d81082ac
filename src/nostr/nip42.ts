/**
 * NIP-42 AUTH events, the checks both sides make: the reference relay before it answers OK,
 * the gateway before it binds a pubkey to a connection. The signature is checked by the
 * caller (each side has its own verifier); everything else is here.
 */
import { randomBytes } from 'node:crypto';
import type { Event } from 'nostr-tools/pure';

export const AUTH_KIND = 22242;
/** How far created_at may be from now, either way (NIP-42 suggests about ten minutes). */
export const AUTH_WINDOW_SEC = 600;
/** Longest challenge a side keeps: a relay's challenge is a short random string. */
export const MAX_CHALLENGE_LENGTH = 256;

/** A fresh challenge for one connection: 128 random bits, hex (never reused, never guessed). */
export function newChallenge(): string {
  return randomBytes(16).toString('hex');
}

/**
 * The same relay URL: scheme and host compared without case, a default port and a bare
 * trailing slash ignored. Anything unparsable is never the same.
 */
export function sameRelayUrl(a: string, b: string): boolean {
  const norm = (url: string) => {
    const u = new URL(url);
    return `${u.protocol}//${u.host}${u.pathname.replace(/\/+$/, '')}${u.search}`;
  };
  try {
    return norm(a) === norm(b);
  } catch {
    return false;
  }
}

function tagValue(event: Event, name: string): string | undefined {
  return event.tags.find((tag) => tag[0] === name)?.[1];
}

/**
 * Why an AUTH event does not answer this challenge for this relay now (a message for the
 * `invalid:` answer), or undefined when it does. `nowSec` is the current Unix time.
 */
export function authEventProblem(
  event: Event,
  expected: { challenge: string; relayUrl: string; nowSec: number },
): string | undefined {
  if (event.kind !== AUTH_KIND) return `an AUTH event has kind ${AUTH_KIND}`;
  if (tagValue(event, 'challenge') !== expected.challenge) {
    return 'the challenge tag is not the challenge of this connection';
  }
  const relay = tagValue(event, 'relay');
  if (relay === undefined || !sameRelayUrl(relay, expected.relayUrl)) {
    return `the relay tag is not ${expected.relayUrl}`;
  }
  if (Math.abs(event.created_at - expected.nowSec) > AUTH_WINDOW_SEC) {
    return `created_at is more than ${AUTH_WINDOW_SEC / 60} minutes from now`;
  }
  return undefined;
}
