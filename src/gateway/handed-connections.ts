/**
 * A cluster worker's public connections: sockets the primary accepted and handed over
 * (sticky-dispatch.ts), served by the worker's HTTP server, which listens nowhere itself.
 * Node counts and drains only the connections a server accepted, so these are tracked here.
 */
import type { Server } from 'node:http';
import type { Socket } from 'node:net';

const DRAIN_POLL_MS = 50;

export class HandedConnections {
  private readonly open = new Set<Socket>();
  private closing = false;

  constructor(private readonly server: Server) {
    // Node starts what enforces headersTimeout and requestTimeout, and what lets
    // closeIdleConnections find idle keep-alive connections, when a server starts listening.
    // This one never listens: it is told it does, so slow clients are bounded as before.
    server.emit('listening');
  }

  /** Serve a handed socket, `head` (what the primary read from it) first. */
  accept(socket: Socket, head?: Buffer): void {
    if (this.closing) {
      socket.destroy();
      return;
    }
    this.open.add(socket);
    socket.once('close', () => this.open.delete(socket));
    this.server.emit('connection', socket);
    if (head) socket.emit('data', head);
    socket.resume();
  }

  /**
   * Refuse new sockets and wait for the open ones to finish, closing each once idle; whatever
   * is still open after `graceMs` is cut.
   */
  async drain(graceMs: number): Promise<void> {
    this.closing = true;
    const deadline = Date.now() + graceMs;
    while (this.open.size > 0 && Date.now() < deadline) {
      this.server.closeIdleConnections();
      await new Promise((resolve) => setTimeout(resolve, DRAIN_POLL_MS));
    }
    for (const socket of this.open) socket.destroy();
  }

  get size(): number {
    return this.open.size;
  }
}
