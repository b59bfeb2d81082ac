/**
 * Subscribers that never read: each opens a WebSocket, subscribes to every new kind-1 event
 * and stops reading, so what the relay sends them backs up. When the relay is restarted after
 * a kill they come back a second later, as clients do.
 */
import { NostrSocket } from './nostr-client.js';

const RECONNECT_MS = 1000;

export class SlowReaders {
  /** Connections lost to a relay restart, and so reopened. */
  closes = 0;
  private readonly sockets = new Set<NostrSocket>();
  private stopped = false;
  private readonly loops: Promise<void>[] = [];

  /** `urlOf(r)`: where reader r connects (ws:// of the relay or of a gateway), asked each time. */
  constructor(
    private readonly count: number,
    private readonly urlOf: (r: number) => string,
  ) {}

  start(): void {
    for (let r = 0; r < this.count; r++) this.loops.push(this.run(r));
  }

  private async run(r: number): Promise<void> {
    while (!this.stopped) {
      let socket: NostrSocket | undefined;
      try {
        socket = await NostrSocket.open(
          this.urlOf(r),
          `127.2.${Math.floor(r / 250)}.${(r % 250) + 1}`,
        );
        this.sockets.add(socket);
        socket.subscribe(`slow-${r}`, [1]);
        // The REQ goes out before reading stops (sending goes on; only reading stops).
        socket.stopReading();
        await socket.ended;
        if (!this.stopped) this.closes++;
      } catch {
        // The relay is down (restarting): try again shortly.
      } finally {
        if (socket) this.sockets.delete(socket);
      }
      if (!this.stopped) await new Promise((res) => setTimeout(res, RECONNECT_MS));
    }
  }

  /**
   * A reader that does not read does not see its connection end either (the close waits in
   * the unread data): when the relay was restarted, drop every connection so each reconnects.
   */
  reconnectAll(): void {
    for (const s of this.sockets) s.close();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const s of this.sockets) s.close();
    await Promise.all(this.loops);
  }
}
