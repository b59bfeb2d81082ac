/** Clients of a test of their own: fresh Nostr authors and fresh loopback source addresses. */
import { finalizeEvent, generateSecretKey, getPublicKey } from 'nostr-tools/pure';
import type { Event } from 'nostr-tools/pure';
import { request } from './gateway.js';

export interface TestAuthor {
  pubkey: string;
  /** Its i-th kind-1 note, dated i seconds ago (a call each second may give another id). */
  event(i: number): Event;
}

/** A fresh author, so what the relays hold of it belongs to one test alone. */
export function freshAuthor(): TestAuthor {
  const sk = generateSecretKey();
  return {
    pubkey: getPublicKey(sk),
    event: (i) =>
      finalizeEvent(
        { kind: 1, created_at: Math.floor(Date.now() / 1000) - i, tags: [], content: `note ${i}` },
        sk,
      ),
  };
}

/**
 * Fresh loopback source addresses under 127.<second>.x.y: each one a client of its own to
 * the gateway, with no header trickery. A file picks a `second` octet no other file uses.
 */
export function addressSource(second: number): () => string {
  let n = 1;
  return () => {
    n++;
    return `127.${second}.${Math.floor(n / 250)}.${(n % 250) + 2}`;
  };
}

/** How many events of one author a relay holds, asked of the relay directly. */
export async function storedAt(relayUrl: string, pubkey: string): Promise<number> {
  const res = await request(`${relayUrl}/events?authors=${pubkey}&limit=1000`);
  return (JSON.parse(res.body) as unknown[]).length;
}
