/**
 * The floor of the Nostr benchmarks (`--implementation ws-floor`): what proxying WebSocket
 * costs in Node with the ws library before any gateway work. Per client connection one relay
 * connection, every message passed on as it came: no parsing, no limit, no decision, no
 * Valkey. The gateway with quotas off is measured against it: what is above it is the
 * gateway's own work; what is under it, no per-connection Node proxy can save.
 */
import type { AddressInfo } from 'node:net';
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
}): Promise<RunningWsFloor> {
  const relayUrl = opts.upstream.replace(/^http/, 'ws');
  const wss = new WebSocketServer({
    host: opts.host,
    port: opts.port,
    perMessageDeflate: false,
    maxPayload: 1 << 20,
  });
  wss.on('connection', (client) => {
    const relay = new WebSocket(relayUrl, { perMessageDeflate: false });
    // What the client sends before the relay's socket is open waits for it.
    const early: RawData[] = [];
    relay.on('open', () => {
      for (const data of early.splice(0)) relay.send(data, { binary: false });
    });
    client.on('message', (data, isBinary) => {
      if (relay.readyState === WebSocket.OPEN) relay.send(data, { binary: isBinary });
      else early.push(data);
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
  });
  await new Promise<void>((resolve, reject) => {
    wss.once('listening', resolve);
    wss.once('error', reject);
  });
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
