/**
 * How a multi-worker gateway spreads its clients: by address, not in turn. The primary holds the
 * public port itself and hands each accepted socket to the worker its client's address hashes
 * to, so every connection of one address lands in one process and every per-address limit kept
 * in process memory (connections per address, frames per second per address, failed
 * verifications per address) holds per gateway, not per worker. Node's round-robin (the cluster
 * default) sent an address's connections to every worker in turn: each counted its share, and
 * an address got `workers x` each limit.
 *
 * The pattern of @socket.io/sticky and sticky-session: `net.createServer({ pauseOnConnect })`
 * in the primary, `worker.send(message, socket)`, and the worker emits the socket on its HTTP
 * server. The primary accepted every connection under round-robin too; what it adds is a hash.
 *
 * Behind a trusted proxy the socket's address is the proxy's: hashing it would send every
 * client to one worker. For a trusted peer the primary reads the connection's first chunk and
 * hashes the client its X-Forwarded-For names (the worker decides the identity again, with the
 * same rules; the chunk goes to the worker with the socket). A WebSocket connection carries one
 * client, so its limits hold per gateway; a keep-alive HTTP connection from a proxy may carry
 * many clients after the first, each counted in the worker the first one chose.
 */
import net from 'node:net';
import type { Socket } from 'node:net';
import type { IncomingMessage } from 'node:http';
import type { ClientAddress } from './client-address.js';
import { rendezvousScore } from './upstreams.js';

/** Bytes of a trusted peer's first chunk the primary searches for the forwarding header. */
const MAX_PEEK_BYTES = 16 * 1024;

/** Where a socket goes: a worker's slot, and what was already read from it. */
export interface Handover {
  socket: Socket;
  /** The first chunk, read in the primary to find a proxied client; the worker reads it first. */
  head?: Buffer;
}

export interface StickyOptions {
  address: ClientAddress;
  /** How long a trusted peer may take to send its first bytes before it is handed over as is. */
  peekTimeoutMs: number;
  /** Give the socket to the worker of this address; false when no worker can take it. */
  handOver(key: string, handover: Handover): boolean;
}

/**
 * The slot an address goes to among the live ones (rendezvous hashing: the highest score of
 * key and slot wins, the score relay nodes are picked by). When a slot goes, only its addresses move; when it comes back, they
 * return, and no other address moves.
 */
export function slotFor(key: string, slots: readonly number[]): number | undefined {
  let best: number | undefined;
  let bestScore = -1;
  for (const slot of slots) {
    const score = rendezvousScore(String(slot), key);
    if (score > bestScore || (score === bestScore && slot < best!)) {
      best = slot;
      bestScore = score;
    }
  }
  return best;
}

/**
 * The X-Forwarded-For of the first request in `head`, joined as Node joins repeated headers;
 * undefined unless the whole header section is there (a partial one could miss a line).
 */
export function forwardedForIn(head: Buffer): string | undefined {
  const text = head.subarray(0, MAX_PEEK_BYTES).toString('latin1');
  const end = text.indexOf('\r\n\r\n');
  if (end < 0) return undefined;
  const values = text
    .slice(0, end)
    .split('\r\n')
    .slice(1)
    .flatMap((line) => {
      const colon = line.indexOf(':');
      if (colon < 0 || line.slice(0, colon).trim().toLowerCase() !== 'x-forwarded-for') return [];
      return [line.slice(colon + 1).trim()];
    });
  return values.length > 0 ? values.join(', ') : undefined;
}

/** The key an address is hashed by: the client as quotas count it (its IPv6 network). */
export function dispatchKey(address: ClientAddress, peer: string, forwardedFor?: string): string {
  if (forwardedFor === undefined) return address.peerIp(peer);
  const request = {
    socket: { remoteAddress: peer },
    connection: { remoteAddress: peer },
    headers: { 'x-forwarded-for': forwardedFor },
  } as unknown as IncomingMessage;
  return address.ip(request);
}

/** The primary's public listener: accepts, picks a worker by address, hands the socket over. */
export function createStickyListener(options: StickyOptions): net.Server {
  return net.createServer({ pauseOnConnect: true }, (socket) => {
    socket.on('error', () => socket.destroy());
    const peer = socket.remoteAddress;
    if (peer === undefined) return socket.destroy();
    if (!options.address.trustsPeer(peer)) {
      return give(options, dispatchKey(options.address, peer), { socket });
    }
    peekFirstChunk(socket, options.peekTimeoutMs, (head) => {
      const forwarded = head && forwardedForIn(head);
      const key = dispatchKey(options.address, peer, forwarded);
      give(options, key, head ? { socket, head } : { socket });
    });
  });
}

function give(options: StickyOptions, key: string, handover: Handover): void {
  if (!options.handOver(key, handover)) handover.socket.destroy();
}

/**
 * The first chunk a trusted peer sends, or undefined if none comes in time; a socket that
 * closes first is simply gone. Paused again before the hand-over.
 */
function peekFirstChunk(
  socket: Socket,
  timeoutMs: number,
  then: (head: Buffer | undefined) => void,
): void {
  const done = (head: Buffer | undefined) => {
    clearTimeout(timer);
    socket.off('data', onData);
    socket.off('close', onClose);
    socket.pause();
    then(head);
  };
  const onData = (chunk: Buffer) => done(chunk);
  const onClose = () => {
    clearTimeout(timer);
    socket.off('data', onData);
  };
  const timer = setTimeout(() => done(undefined), timeoutMs);
  socket.on('data', onData);
  socket.once('close', onClose);
  socket.resume();
}
