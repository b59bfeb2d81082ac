/**
 * A Nostr client written by hand over node:net, for what a client library would not do:
 * frames of any size sent as bytes, a FIN right after them (the client leaves before any
 * answer), and the server's messages read as they come.
 */
import type net from 'node:net';
import { decodeServerFrame, encodeWsFrame } from './fuzz-socket.js';
import { rawUpgrade } from './raw-socket.js';

/** A client's masked text frame carrying `message` as JSON (several may go in one write). */
export function textFrame(message: unknown): Buffer {
  const payload = Buffer.from(JSON.stringify(message));
  return encodeWsFrame({ fin: true, rsv: 0, opcode: 1, payload, masked: true });
}

export class RawNostr {
  readonly received: unknown[][] = [];
  private buffered: Buffer = Buffer.alloc(0);

  private constructor(readonly socket: net.Socket) {
    socket.on('data', (chunk: Buffer) => this.read(chunk));
    socket.on('error', () => undefined);
    socket.resume();
  }

  /** Upgrade from `from`, with extra headers (an X-Forwarded-For a trusted proxy would add). */
  static async open(
    baseUrl: string,
    from: string,
    headers: Record<string, string> = {},
  ): Promise<RawNostr> {
    const answer = await rawUpgrade(baseUrl, { from, headers });
    if (answer.status !== 101) throw new Error(`upgrade answered ${answer.status}`);
    return new RawNostr(answer.socket);
  }

  /** One masked text frame with this message. */
  send(message: unknown): void {
    this.socket.write(textFrame(message));
  }

  /** Half-close: the client sends nothing more, and goes (a FIN, no WebSocket close). */
  fin(): void {
    this.socket.end();
  }

  close(): void {
    this.socket.destroy();
  }

  async until(what: string, predicate: (msgs: unknown[][]) => boolean, timeoutMs = 10_000) {
    const deadline = Date.now() + timeoutMs;
    while (!predicate(this.received)) {
      if (Date.now() > deadline) {
        throw new Error(`timed out waiting for ${what}: ${JSON.stringify(this.received)}`);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** The first OK for `id`, waited for. */
  async okFor(id: string): Promise<unknown[]> {
    const ok = (m: unknown[]) => m[0] === 'OK' && m[1] === id;
    await this.until(`OK ${id.slice(0, 8)}`, (msgs) => msgs.some(ok));
    return this.received.find(ok)!;
  }

  /** Server frames: unmasked, text messages kept, control frames skipped. */
  private read(chunk: Buffer): void {
    this.buffered = Buffer.concat([this.buffered, chunk]);
    for (
      let frame = decodeServerFrame(this.buffered);
      frame;
      frame = decodeServerFrame(frame.rest)
    ) {
      this.buffered = frame.rest;
      if (frame.opcode === 1) {
        this.received.push(JSON.parse(frame.payload.toString('utf8')) as unknown[]);
      }
    }
  }
}
