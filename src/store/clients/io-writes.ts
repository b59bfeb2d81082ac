import type { Socket } from 'node:net';

/** The part of an ioredis / iovalkey connection whose socket writes are coalesced. */
interface IoConnection {
  stream?: Socket;
  on(event: 'connect', listener: () => void): unknown;
}

/** A standalone client is one connection; a cluster client has one per node it has met. */
export interface IoClientLike {
  on(event: string, listener: (...args: never[]) => void): unknown;
  nodes?: () => IoConnection[];
}

/** Coalesce the writes of a client's every connection: a cluster's nodes, now and later. */
export function coalesceClientWrites(client: IoClientLike): void {
  if (typeof client.nodes !== 'function') {
    coalesceIoWrites(client);
    return;
  }
  for (const node of client.nodes()) coalesceIoWrites(node);
  client.on('+node', (node: IoConnection) => coalesceIoWrites(node));
}

/**
 * ioredis and iovalkey write each command (or each auto-pipeline, flushed on process.nextTick,
 * so once per socket read) to the socket at once: under load one write syscall per write
 * decision. Here the socket is corked at the first write of an event-loop turn and uncorked
 * by setImmediate (after this turn's I/O callbacks), so the commands of every frame read in
 * one turn leave in one writev, as glide-writes.ts does for glide. Commands, order and
 * answers are unchanged; a reconnect's new socket is wrapped when it connects.
 */
export function coalesceIoWrites(connection: IoConnection): void {
  if ((connection as { coalescing?: true }).coalescing) return;
  (connection as { coalescing?: true }).coalescing = true;
  const wrap = () => {
    const socket = connection.stream;
    // The socket itself is marked too: a connection may reconnect to the one it had.
    if (!socket || (socket as { coalesced?: true }).coalesced) return;
    (socket as { coalesced?: true }).coalesced = true;
    const write = socket.write.bind(socket) as (...args: unknown[]) => boolean;
    let corked = false;
    const uncork = () => {
      corked = false;
      socket.uncork();
    };
    socket.write = (...args: unknown[]) => {
      if (!corked) {
        corked = true;
        socket.cork();
        setImmediate(uncork);
      }
      return write(...args);
    };
  };
  connection.on('connect', wrap);
  wrap();
}
