import { getPow } from 'nostr-tools/nip13';
import { finalizeEvent, generateSecretKey, getEventHash, getPublicKey } from 'nostr-tools/pure';
import type { Event } from 'nostr-tools/pure';
import { NostrClient } from './gateway.js';

/**
 * A kind-1 note in `pubkey`'s name, created now: its id is the hash of its content (so a
 * gateway can charge it on the hash), its signature `sig`, which is not `pubkey`'s.
 */
export function inNameOf(pubkey: string, content: string, sig: string): Event {
  const body = { kind: 1, created_at: Math.floor(Date.now() / 1000), tags: [], content, pubkey };
  return { ...body, id: getEventHash(body), sig };
}

/** A signed event of `kind`, created now, by `sk` (a fresh key unless given). */
export function signedEvent(
  kind: number,
  content: string,
  sk = generateSecretKey(),
  tags: string[][] = [],
): Event {
  return finalizeEvent({ kind, created_at: Math.floor(Date.now() / 1000), tags, content }, sk);
}

/**
 * A signed event whose id has at least `difficulty` leading zero bits (NIP-13), its nonce
 * tag committing to `committed` (the difficulty unless given).
 */
export function minedEvent(
  kind: number,
  content: string,
  difficulty: number,
  committed = difficulty,
  sk = generateSecretKey(),
): Event {
  const base = { kind, created_at: Math.floor(Date.now() / 1000), content };
  const pubkey = getPublicKey(sk);
  for (let n = 0; ; n++) {
    const tags = [['nonce', String(n), String(committed)]];
    if (getPow(getEventHash({ ...base, tags, pubkey })) >= difficulty) {
      return finalizeEvent({ ...base, tags }, sk);
    }
  }
}

/** A signed event whose id has fewer than `bits` leading zero bits (no luck allowed). */
export function unminedEvent(kind: number, content: string, bits: number): Event {
  for (;;) {
    const event = signedEvent(kind, content);
    if (getPow(event.id) < bits) return event;
  }
}

/** Whether a relay holds an event, asked directly over its own WebSocket. */
export async function relayHas(relayUrl: string, id: string): Promise<boolean> {
  const reader = await NostrClient.connect(relayUrl);
  try {
    reader.send(['REQ', 'probe', { ids: [id] }]);
    const msgs = await reader.until((m) => m.some((x) => x[0] === 'EOSE'));
    return msgs.some((m) => m[0] === 'EVENT' && (m[2] as Event).id === id);
  } finally {
    reader.close();
  }
}
