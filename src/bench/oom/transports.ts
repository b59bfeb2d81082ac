/**
 * How flood writes reach the gateways: HTTP POST /events (the reference relay's API), or
 * EVENTs over WebSocket (a relay that speaks only Nostr).
 */
import { postEvent } from '../run/post-event.js';
import { identityAddress } from './flood.js';
import type { Answer, FloodShape, FloodTransport, SignedEvent } from './flood.js';
import { NostrSocket, UpgradeRefused } from './nostr-client.js';

/** An HTTP answer as a client reads it: stored only on 2xx with `accepted: true`. */
export function classifyHttp(status: number, body: string): Answer {
  const code = status === 0 ? 'no answer' : String(status);
  if (status === 0) return { outcome: 'error', code };
  if (status >= 200 && status < 300) {
    let accepted = false;
    try {
      accepted = (JSON.parse(body) as { accepted?: unknown }).accepted === true;
    } catch {
      // Not JSON: not an acknowledgement.
    }
    return { outcome: accepted ? 'ok' : 'refused', code };
  }
  if (status === 429) return { outcome: 'limited', code };
  if (status >= 500) return { outcome: 'server', code };
  return { outcome: 'client', code };
}

/** Each write on a fresh connection from its identity's address, to the gateways in turn. */
export function httpTransport(gatewayUrls: string[], shape: FloodShape): FloodTransport {
  let k = 0;
  return {
    async send(identity, event) {
      const url = `${gatewayUrls[k++ % gatewayUrls.length]}/events`;
      const answer = await postEvent(url, event.json, identityAddress(shape, identity));
      return classifyHttp(answer.status, answer.body);
    },
    close: async () => {},
  };
}

/**
 * One write on its own WebSocket from its identity's address: connect, EVENT, OK, close, as
 * the rotating identities of a spam wave do. (A thousand held connections would measure
 * the relay's memory per connection, not its writes.)
 */
export async function wsOneShot(url: string, from: string, event: SignedEvent): Promise<Answer> {
  let socket: NostrSocket;
  try {
    socket = await NostrSocket.open(url.replace(/^http/, 'ws'), from);
  } catch (err) {
    if (err instanceof UpgradeRefused) return classifyHttp(err.status, '');
    return { outcome: 'error', code: 'connect failed' };
  }
  try {
    return await socket.send(event.id, event.json);
  } finally {
    socket.close();
  }
}

/**
 * EVENTs over WebSocket to the gateways in turn: on one held connection per identity
 * (opened again after the gateway or relay closed it), or on one connection per write. By
 * default the heavy writer holds its connection and the spam wave connects per write.
 */
export function wsTransport(
  gatewayUrls: string[],
  shape: FloodShape,
  connections: 'held' | 'per-write' = shape === 'spam' ? 'per-write' : 'held',
): FloodTransport {
  if (connections === 'per-write') {
    let k = 0;
    return {
      send: (identity, event) =>
        wsOneShot(gatewayUrls[k++ % gatewayUrls.length]!, identityAddress(shape, identity), event),
      close: () => Promise.resolve(),
    };
  }
  const sockets = new Map<number, Promise<NostrSocket>>();
  const socketOf = (identity: number): Promise<NostrSocket> => {
    let s = sockets.get(identity);
    if (!s) {
      const url = gatewayUrls[identity % gatewayUrls.length]!.replace(/^http/, 'ws');
      s = NostrSocket.open(url, identityAddress(shape, identity));
      // A failed open is answered once, then the next write tries again.
      s.catch(() => sockets.delete(identity));
      sockets.set(identity, s);
    }
    return s;
  };
  return {
    async send(identity, event) {
      let socket: NostrSocket;
      try {
        socket = await socketOf(identity);
        if (!socket.isOpen) {
          sockets.delete(identity);
          socket = await socketOf(identity);
        }
      } catch (err) {
        if (err instanceof UpgradeRefused) return classifyHttp(err.status, '');
        return { outcome: 'error', code: 'connect failed' };
      }
      return socket.send(event.id, event.json);
    },
    async close() {
      const open = await Promise.allSettled(sockets.values());
      for (const s of open) if (s.status === 'fulfilled') s.value.close();
      sockets.clear();
    },
  };
}
