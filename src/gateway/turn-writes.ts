import type { Writable } from 'node:stream';

/**
 * Frames written to a socket in one callback of the event loop, and in the promise jobs it
 * starts, leave together: the socket is corked at its first held write and uncorked once that
 * callback's ticks and jobs are done, so they go out in one system call instead of one each.
 * A relay answers a REQ with many EVENT frames that arrive in one read; passed on one by one,
 * each would cost the gateway a socket write of its own. No frame waits for another socket's
 * work: the release runs before the event loop moves on to the next ready socket. The pump
 * holds only a subscription's events (ws-connection.ts): a write's EVENT and OK travel one to
 * a callback, where holding would only add its own work.
 *
 * end() uncorks by itself, so an ended socket still sends what it held; a destroyed socket
 * drops it, as it drops any bytes not yet written.
 */
export class TurnWrites {
  private readonly held = new Set<Writable>();
  private releasing = false;

  /** Hold what is written to `socket` until the current callback is done. */
  hold(socket: Writable): void {
    if (this.held.has(socket) || socket.destroyed || socket.writableEnded) return;
    socket.cork();
    this.held.add(socket);
    if (this.releasing) return;
    this.releasing = true;
    process.nextTick(this.release);
  }

  private readonly release = (): void => {
    this.releasing = false;
    for (const socket of this.held) {
      // Another cork() of ours cannot be pending; ws's own are paired within a frame.
      if (socket.writableCorked > 0) socket.uncork();
    }
    this.held.clear();
  };
}
