/**
 * Raw TCP exchanges for fuzzing: write any bytes (HTTP that no client library would send,
 * WebSocket frames masked or not), then see whether the server answered and whether it
 * closed the connection within a deadline. Nothing here parses strictly: a fuzz run must
 * survive whatever comes back.
 */
import { randomBytes } from 'node:crypto';
import net from 'node:net';

/** How an exchange ended, from the client's side. */
export type Ending =
  /** The server closed (or reset) the connection within the deadline. */
  | 'closed'
  /** The connection was still open at the deadline. */
  | 'hung'
  /** The connection could not be opened at all (is the server still up?). */
  | 'refused';

export interface ExchangeResult {
  ending: Ending;
  /** Status codes of the HTTP responses seen (a 101 included). */
  statuses: number[];
  /** Bytes the server sent. */
  received: number;
  ms: number;
  /** Close codes in the server's WebSocket Close frames, after a 101. */
  closeCodes: number[];
  /** Text messages the server sent over WebSocket, after a 101. */
  messages: number;
}

/** One WebSocket frame as the fuzz wants it, valid or not. */
export interface WsFrameSpec {
  fin: boolean;
  /** RSV1-3 bits (0-7): anything but 0 is a protocol error without an extension. */
  rsv: number;
  opcode: number;
  payload: Buffer;
  /** Client frames must be masked (RFC 6455); false sends one unmasked. */
  masked: boolean;
  /** The length written in the header, when it should lie about the payload. */
  declaredLength?: bigint;
}

export function encodeWsFrame(spec: WsFrameSpec): Buffer {
  const length = spec.declaredLength ?? BigInt(spec.payload.length);
  const head: number[] = [(spec.fin ? 0x80 : 0) | ((spec.rsv & 7) << 4) | (spec.opcode & 0x0f)];
  const maskBit = spec.masked ? 0x80 : 0;
  let extended = Buffer.alloc(0);
  if (length < 126n) {
    head.push(maskBit | Number(length));
  } else if (length <= 0xffffn) {
    head.push(maskBit | 126);
    extended = Buffer.alloc(2);
    extended.writeUInt16BE(Number(length));
  } else {
    head.push(maskBit | 127);
    extended = Buffer.alloc(8);
    extended.writeBigUInt64BE(BigInt.asUintN(64, length));
  }
  if (!spec.masked) return Buffer.concat([Buffer.from(head), extended, spec.payload]);
  const key = randomBytes(4);
  const body = Buffer.from(spec.payload);
  for (let i = 0; i < body.length; i++) body[i]! ^= key[i % 4]!;
  return Buffer.concat([Buffer.from(head), extended, key, body]);
}

/** A server frame (unmasked) read from the start of a buffer. */
export interface ServerFrame {
  opcode: number;
  payload: Buffer;
  /** What follows the frame. */
  rest: Buffer;
}

/** The unmasked frame at the start of `buf`, or undefined while it is incomplete. */
export function decodeServerFrame(buf: Buffer): ServerFrame | undefined {
  if (buf.length < 2) return undefined;
  let length = buf[1]! & 0x7f;
  let offset = 2;
  if (length === 126) {
    if (buf.length < 4) return undefined;
    length = buf.readUInt16BE(2);
    offset = 4;
  } else if (length === 127) {
    if (buf.length < 10) return undefined;
    length = Number(buf.readBigUInt64BE(2));
    offset = 10;
  }
  if (buf.length < offset + length) return undefined;
  return {
    opcode: buf[0]! & 0x0f,
    payload: buf.subarray(offset, offset + length),
    rest: buf.subarray(offset + length),
  };
}

/** A proper client handshake for `path` (the key is random: the server checks its form only). */
export function upgradeRequest(path: string, host = 'gateway'): Buffer {
  return Buffer.from(
    `GET ${path} HTTP/1.1\r\nHost: ${host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
      `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\nSec-WebSocket-Version: 13\r\n\r\n`,
  );
}

const STATUS_LINE = /HTTP\/1\.[01] (\d{3})/g;

/** Counts what a server sent: HTTP status lines, then (after a 101) WebSocket frames. */
class Received {
  bytes = 0;
  statuses: number[] = [];
  closeCodes: number[] = [];
  messages = 0;
  private head = '';
  private frames: Buffer | undefined;

  add(chunk: Buffer): void {
    this.bytes += chunk.length;
    if (this.frames) {
      this.frames = Buffer.concat([this.frames, chunk]);
      this.parseFrames();
      return;
    }
    this.head += chunk.toString('latin1');
    this.statuses = [...this.head.matchAll(STATUS_LINE)].map((m) => Number(m[1]));
    if (this.statuses.at(-1) === 101) {
      const end = this.head.indexOf('\r\n\r\n', this.head.lastIndexOf('HTTP/1.1 101'));
      if (end >= 0) {
        this.frames = Buffer.from(this.head.slice(end + 4), 'latin1');
        this.head = this.head.slice(0, end + 4);
        this.parseFrames();
      }
    }
    // Only status lines are wanted: keep the tail in case one is split across chunks.
    if (!this.frames && this.head.length > 64 * 1024) this.head = this.head.slice(-1024);
  }

  get upgraded(): boolean {
    return this.frames !== undefined;
  }

  /** Server frames are unmasked; stop at anything that does not fit. */
  private parseFrames(): void {
    for (
      let frame = decodeServerFrame(this.frames!);
      frame;
      frame = decodeServerFrame(frame.rest)
    ) {
      const { opcode, payload } = frame;
      if (opcode === 1) this.messages++;
      if (opcode === 8) this.closeCodes.push(payload.length >= 2 ? payload.readUInt16BE(0) : 1005);
      this.frames = frame.rest;
    }
  }
}

export interface ExchangePlan {
  port: number;
  host?: string;
  localAddress: string;
  /** Written in order, each after its gap. */
  chunks: Buffer[];
  gapsMs?: number[];
  /**
   * When to send FIN: 'now' after the last chunk; 'after-answer' once a response came (or
   * at once, if the server already closed); 'never' leaves closing to the server's timeouts.
   * After a 101 the client always ends with FIN: an open WebSocket may idle for hours.
   */
  fin: 'now' | 'after-answer' | 'never';
  /** Sent after the 101, before the FIN (the WebSocket session). */
  afterUpgrade?: { frames: Buffer[]; gapsMs?: number[]; closeFrame?: Buffer };
  /** The server must have closed the connection within this. */
  deadlineMs: number;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Run one exchange. Never rejects: what happened is in the result. Destroys the socket at
 * the deadline, whatever its state.
 */
export function runExchange(plan: ExchangePlan): Promise<ExchangeResult> {
  const started = Date.now();
  const received = new Received();
  return new Promise((resolve) => {
    const socket = net.connect({
      host: plan.host ?? '127.0.0.1',
      port: plan.port,
      localAddress: plan.localAddress,
    });
    let connected = false;
    let settled = false;
    let finSent = false;
    const finish = (ending: Ending) => {
      if (settled) return;
      settled = true;
      clearTimeout(deadline);
      socket.destroy();
      resolve({
        ending,
        statuses: received.statuses,
        received: received.bytes,
        ms: Date.now() - started,
        closeCodes: received.closeCodes,
        messages: received.messages,
      });
    };
    const deadline = setTimeout(() => finish(connected ? 'hung' : 'refused'), plan.deadlineMs);
    const sendFin = () => {
      if (finSent || socket.destroyed) return;
      finSent = true;
      socket.end();
    };
    let upgradedHandled = false;
    socket.on('data', (chunk: Buffer) => {
      received.add(chunk);
      if (plan.fin === 'after-answer' && received.statuses.some((s) => s >= 200)) sendFin();
      if (received.upgraded && !upgradedHandled) {
        upgradedHandled = true;
        void sendSession(socket, plan.afterUpgrade).then(sendFin);
      }
    });
    socket.on('error', () => finish(connected ? 'closed' : 'refused'));
    socket.on('close', () => finish(connected ? 'closed' : 'refused'));
    socket.once('connect', () => {
      connected = true;
      void (async () => {
        for (let i = 0; i < plan.chunks.length; i++) {
          const gap = plan.gapsMs?.[i] ?? 0;
          if (gap > 0) await sleep(gap);
          if (socket.destroyed || settled) return;
          socket.write(plan.chunks[i]!);
        }
        if (plan.fin === 'now' && !received.upgraded) sendFin();
      })();
    });
  });
}

async function sendSession(
  socket: net.Socket,
  session: ExchangePlan['afterUpgrade'],
): Promise<void> {
  if (!session) return;
  for (let i = 0; i < session.frames.length; i++) {
    const gap = session.gapsMs?.[i] ?? 0;
    if (gap > 0) await sleep(gap);
    if (socket.destroyed) return;
    socket.write(session.frames[i]!);
  }
  // Let the gateway answer what it can before this side says goodbye.
  await sleep(50);
  if (session.closeFrame && !socket.destroyed) socket.write(session.closeFrame);
}
