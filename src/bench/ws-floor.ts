/**
 * The floors of the Nostr benchmarks (`--implementation ws-floor[-SHAPE]`): what proxying
 * WebSocket costs in Node before any gateway work. No parsing of what a message says, no
 * limit, no decision, no Valkey. The gateway with quotas off is measured against them: what
 * is above a floor is the gateway's own work; what is under it, that shape of proxy cannot
 * save.
 *
 * - `ws` (`ws-floor`): the ws library, one relay connection per client connection, every
 *   message passed on as it came (what the gateway's pump is built on).
 * - `pooled` (`ws-floor-pooled`): every client's EVENT goes to the relay over one shared
 *   connection, the EVENTs of an event-loop turn in one socket write, and each OK back to
 *   the client that sent its id; any other message goes over a connection of the client's
 *   own, opened when first needed.
 * - `frames` (`ws-floor-frames`): no WebSocket library. The bytes go on as they came, the
 *   client's frames with the client's own mask; each client frame is found and its payload
 *   unmasked into a copy, which is what reading a frame costs at the least. The relay's
 *   bytes go back untouched.
 * - `tcp` (`ws-floor-tcp`): a TCP pipe, nothing read at all: the floor of any Node proxy.
 */
import { connect, createServer } from 'node:net';
import type { AddressInfo, Socket } from 'node:net';
import { WebSocket, WebSocketServer } from 'ws';
import type { RawData } from 'ws';
import type { FloorShape } from './run/config.js';

/** The largest message a floor takes from a client. */
const FLOOR_MAX_PAYLOAD = 1 << 20;

export interface RunningWsFloor {
  url: string;
  close(): Promise<void>;
}

export async function startWsFloor(opts: {
  host: string;
  port: number;
  /** The relay's base URL (http: or ws:). */
  upstream: string;
  /** Which floor (see above); `ws` when not given. */
  shape?: FloorShape;
}): Promise<RunningWsFloor> {
  if (opts.shape === 'tcp' || opts.shape === 'frames') return startBytePipe(opts, opts.shape);
  const relayUrl = opts.upstream.replace(/^http/, 'ws');
  const wss = new WebSocketServer({
    host: opts.host,
    port: opts.port,
    perMessageDeflate: false,
    maxPayload: FLOOR_MAX_PAYLOAD,
  });
  const listening = new Promise<void>((resolve, reject) => {
    wss.once('listening', resolve);
    wss.once('error', reject);
  });
  if (opts.shape === 'pooled') await poolEvents(wss, relayUrl);
  else passEverything(wss, relayUrl);
  await listening;
  const { port } = wss.address() as AddressInfo;
  return {
    url: `http://${opts.host}:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        for (const c of wss.clients) c.terminate();
        wss.close(() => resolve());
      }),
  };
}

/** Per client connection one relay connection, every message passed on as it came. */
function passEverything(wss: WebSocketServer, relayUrl: string): void {
  wss.on('connection', (client) => {
    const relay = relayOf(client, relayUrl);
    client.on('message', (data, isBinary) => relay.send(data, isBinary));
  });
}

/**
 * A relay connection of the client's own: what the client sends before it is open waits for
 * it, what the relay sends goes back to the client, and either side's end ends both.
 */
function relayOf(
  client: WebSocket,
  relayUrl: string,
): { send(data: RawData, binary: boolean): void } {
  const relay = new WebSocket(relayUrl, { perMessageDeflate: false });
  const early: RawData[] = [];
  relay.on('open', () => {
    for (const data of early.splice(0)) relay.send(data, { binary: false });
  });
  relay.on('message', (data, isBinary) => client.send(data, { binary: isBinary }));
  const end = () => {
    client.terminate();
    relay.terminate();
  };
  for (const side of [client, relay]) {
    side.on('close', end);
    side.on('error', end);
  }
  return {
    send(data, binary) {
      if (relay.readyState === WebSocket.OPEN) relay.send(data, { binary });
      else early.push(data);
    },
  };
}

/** `["EVENT",` at the start of a client's frame, `["OK","` of the relay's answer. */
const EVENT_PREFIX = Buffer.from('["EVENT",');
const OK_PREFIX = Buffer.from('["OK","');
const ID_KEY = Buffer.from('"id":"');

/** A client's EVENT's id, found without parsing the frame (the floor parses nothing). */
function eventId(frame: Buffer): string | undefined {
  if (frame.compare(EVENT_PREFIX, 0, EVENT_PREFIX.length, 0, EVENT_PREFIX.length) !== 0) return;
  const at = frame.indexOf(ID_KEY);
  return at < 0 || frame.length < at + 70 ? undefined : frame.toString('latin1', at + 6, at + 70);
}

/** One relay connection for every client's EVENTs; anything else on one of the client's own. */
async function poolEvents(wss: WebSocketServer, relayUrl: string): Promise<void> {
  const pool = new WebSocket(relayUrl, { perMessageDeflate: false });
  await new Promise<void>((resolve, reject) => {
    pool.once('open', resolve);
    pool.once('error', reject);
  });
  // The EVENTs of one event-loop turn leave in one write (as io-writes.ts does for Valkey).
  const socket = (pool as unknown as { _socket: Socket })._socket;
  let corked = false;
  const uncork = () => {
    corked = false;
    socket.uncork();
  };
  // Who waits for each id's OK, first come first answered (two clients may send one event).
  const waiting = new Map<string, WebSocket[]>();
  pool.on('message', (data: Buffer) => {
    if (data.compare(OK_PREFIX, 0, OK_PREFIX.length, 0, OK_PREFIX.length) !== 0) return;
    const id = data.toString('latin1', OK_PREFIX.length, OK_PREFIX.length + 64);
    const clients = waiting.get(id);
    const client = clients?.shift();
    if (clients?.length === 0) waiting.delete(id);
    if (client?.readyState === WebSocket.OPEN) client.send(data, { binary: false });
  });
  const end = () => {
    for (const c of wss.clients) c.terminate();
  };
  pool.on('close', end);
  pool.on('error', end);
  wss.on('connection', (client) => {
    // Anything but an EVENT goes over a relay connection of the client's own, opened for it.
    let own: ReturnType<typeof relayOf> | undefined;
    client.on('message', (data: Buffer, isBinary) => {
      const id = isBinary ? undefined : eventId(data);
      if (id === undefined) {
        (own ??= relayOf(client, relayUrl)).send(data, isBinary);
        return;
      }
      const clients = waiting.get(id);
      if (clients) clients.push(client);
      else waiting.set(id, [client]);
      if (!corked) {
        corked = true;
        socket.cork();
        setImmediate(uncork);
      }
      pool.send(data, { binary: false });
    });
  });
}

/** The `tcp` and `frames` floors: the relay's TCP connection per client, bytes passed on. */
async function startBytePipe(
  opts: { host: string; port: number; upstream: string },
  shape: 'tcp' | 'frames',
): Promise<RunningWsFloor> {
  const relay = new URL(opts.upstream.replace(/^ws/, 'http'));
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = connect({ host: relay.hostname, port: Number(relay.port || 80) });
    for (const side of [client, upstream]) {
      side.setNoDelay(true);
      sockets.add(side);
      side.on('close', () => {
        sockets.delete(side);
        client.destroy();
        upstream.destroy();
      });
      side.on('error', () => side.destroy());
    }
    upstream.on('data', (chunk: Buffer) => client.write(chunk));
    if (shape === 'tcp') {
      client.on('data', (chunk: Buffer) => upstream.write(chunk));
      return;
    }
    const read = clientFrames((bytes) => upstream.write(bytes));
    client.on('data', (chunk: Buffer) => {
      // Past the bound ws-floor sets (maxPayload), the client is cut as ws would close it.
      if (!read(chunk)) client.destroy();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, resolve);
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://${opts.host}:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

const HEAD_END = Buffer.from('\r\n\r\n');

/** The most a floor holds of one client: ws-floor's maxPayload and a frame's longest head. */
const MAX_HELD_BYTES = FLOOR_MAX_PAYLOAD + 14;

/**
 * A client's bytes as the `frames` floor reads them: the upgrade request passed on, then each
 * complete frame found, its payload unmasked into a copy (the least a proxy that looks at
 * frames does) and its bytes passed on as they came; a frame cut by a chunk waits for the rest.
 * `unmasked` is given each payload (the test reads them; the floor only makes them). The
 * function returns false once what waits is past `maxHeld` bytes: cut that client.
 */
export function clientFrames(
  pass: (bytes: Buffer) => void,
  unmasked: (payload: Buffer) => void = () => {},
  maxHeld = MAX_HELD_BYTES,
): (chunk: Buffer) => boolean {
  let inHead = true;
  let held: Buffer | undefined;
  return (chunk) => {
    const buf = held ? Buffer.concat([held, chunk]) : chunk;
    held = undefined;
    let at = 0;
    if (inHead) {
      const end = buf.indexOf(HEAD_END);
      if (end < 0) {
        held = buf;
        return buf.length <= maxHeld;
      }
      inHead = false;
      at = end + HEAD_END.length;
    }
    for (;;) {
      const next = frameEnd(buf, at, unmasked);
      if (next < 0) break;
      at = next;
    }
    if (at > 0) pass(buf.subarray(0, at));
    if (at < buf.length) held = Buffer.from(buf.subarray(at));
    return (held?.length ?? 0) <= maxHeld;
  };
}

/** Where the frame at `at` ends (its payload unmasked into a copy), or -1 if it is not whole. */
function frameEnd(buf: Buffer, at: number, unmasked: (payload: Buffer) => void): number {
  if (buf.length - at < 2) return -1;
  const second = buf[at + 1]!;
  let length = second & 0x7f;
  let head = 2;
  if (length === 126) {
    if (buf.length - at < 4) return -1;
    length = buf.readUInt16BE(at + 2);
    head = 4;
  } else if (length === 127) {
    if (buf.length - at < 10) return -1;
    length = Number(buf.readBigUInt64BE(at + 2));
    head = 10;
  }
  const maskAt = at + head;
  const start = maskAt + (second & 0x80 ? 4 : 0);
  if (buf.length < start + length) return -1;
  const payload = Buffer.from(buf.subarray(start, start + length));
  if (second & 0x80) {
    for (let i = 0; i < length; i++) payload[i] = payload[i]! ^ buf[maskAt + (i & 3)]!;
  }
  unmasked(payload);
  return start + length;
}
