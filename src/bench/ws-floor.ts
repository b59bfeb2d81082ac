/**
 * The floor of the Nostr benchmarks (`--implementation ws-floor`): what proxying WebSocket
 * costs in Node with the ws library before any gateway work. Per client connection one relay
 * connection, every message passed on as it came: no parsing, no limit, no decision, no
 * Valkey. The gateway with quotas off is measured against it: what is above it is the
 * gateway's own work; what is under it, no per-connection Node proxy can save.
 *
 * `pooled` (`--implementation ws-floor-pooled`) is the one design that could go under that
 * floor: every client's EVENT goes to the relay over one shared connection, the EVENTs of an
 * event-loop turn in one socket write, and each OK back to the client that sent its id; any
 * other message goes over a connection of the client's own, opened when first needed.
 */
import type { AddressInfo, Socket } from 'node:net';
import { WebSocket, WebSocketServer } from 'ws';
import type { RawData } from 'ws';

export interface RunningWsFloor {
  url: string;
  close(): Promise<void>;
}

export async function startWsFloor(opts: {
  host: string;
  port: number;
  /** The relay's base URL (http: or ws:). */
  upstream: string;
  /** Every client's EVENT over one relay connection (see above). */
  pooled?: boolean;
}): Promise<RunningWsFloor> {
  const relayUrl = opts.upstream.replace(/^http/, 'ws');
  const wss = new WebSocketServer({
    host: opts.host,
    port: opts.port,
    perMessageDeflate: false,
    maxPayload: 1 << 20,
  });
  const listening = new Promise<void>((resolve, reject) => {
    wss.once('listening', resolve);
    wss.once('error', reject);
  });
  if (opts.pooled) await poolEvents(wss, relayUrl);
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
