/**
 * Where a write over WebSocket and the same write POSTed over HTTP may be charged or answered
 * differently, each with its reason: the one list (test/unit/gateway/write-transports.test.ts
 * holds both transports to the same charges everywhere else).
 */
export const TRANSPORT_DIFFERENCES = {
  /** Charges differ: the HTTP request pays its fee, the WebSocket frame is refused before. */
  'held-on-connection':
    "A WebSocket refuses an event its own connection still awaits the relay's answer for, or one " +
    "past its awaited bounds, before any charge (the state is the connection's). HTTP has no " +
    'connection: each request is its own write, pays its fee, and the relay answers the second.',
  /** Not generated (HTTP cannot carry it). */
  'auth-only-over-websocket':
    'NIP-42 AUTH exists only on a WebSocket: an AUTH pubkey is charged besides the address there, ' +
    'and nostr.authRequiredForWrites refuses every event POSTed over HTTP.',
  /** Answers differ, charges do not. */
  'duplicate-answered-by-relay-over-http':
    'A replay of a stored event is answered `duplicate:` by the gateway over WebSocket; over ' +
    "HTTP it is forwarded, uncharged but for its fee, so that the client gets the relay's own " +
    'answer format.',
  /** Answers differ, charges do not. */
  'invalid-closes-only-a-connection':
    'A WebSocket sending nostr.maxInvalidEvents forgeries is closed; HTTP has no connection to ' +
    'close (each forgery still pays its fee).',
} as const;

export type TransportDifference = keyof typeof TRANSPORT_DIFFERENCES;
