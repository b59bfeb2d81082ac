import { finalizeEvent, generateSecretKey } from 'nostr-tools/pure';
import type { Event } from 'nostr-tools/pure';
import { NostrClient } from './gateway.js';

/** A signed event of `kind`, created now, by `sk` (a fresh key unless given). */
export function signedEvent(
  kind: number,
  content: string,
  sk = generateSecretKey(),
  tags: string[][] = [],
): Event {
  return finalizeEvent({ kind, created_at: Math.floor(Date.now() / 1000), tags, content }, sk);
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
