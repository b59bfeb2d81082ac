/**
 * A TCP proxy between a gateway and its relay that can make the relay slow or make it close,
 * without changing the relay: on command it holds what the gateway sends over WebSocket
 * connections (after their handshake), so the relay sees those frames, and answers them, only
 * when the test releases them; or it cuts those connections, as a relay that closes its socket
 * with answers awaited. Plain HTTP (health checks, NIP-11, POSTed events) always passes.
 */
import net from 'node:net';
import type { AddressInfo } from 'node:net';

interface Link {
  client: net.Socket;
  upstream: net.Socket;
  /** The connection asked for a WebSocket upgrade. */
  ws: boolean;
  /** The relay has answered the handshake: what follows from the gateway are frames. */
  open: boolean;
  held: Buffer[];
}

export class HoldingProxy {
  private readonly links = new Set<Link>();
  private holding = false;

  private constructor(
    private readonly server: net.Server,
    target: URL,
  ) {
    server.on('connection', (client) => this.link(client, target));
  }

  /** A proxy on a free loopback port in front of `targetUrl` (http://host:port). */
  static async start(targetUrl: string): Promise<HoldingProxy> {
    const server = net.createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return new HoldingProxy(server, new URL(targetUrl));
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  /** WebSocket connections whose frames are held now. */
  get heldConnections(): number {
    return [...this.links].filter((l) => l.held.length > 0).length;
  }

  /** From now on, frames the gateway sends over WebSocket wait for `release` (or `cut`). */
  hold(): void {
    this.holding = true;
  }

  /** Pass what was held to the relay, and everything from now on. */
  release(): void {
    this.holding = false;
    for (const l of this.links) {
      for (const chunk of l.held.splice(0)) l.upstream.write(chunk);
    }
  }

  /** Close every WebSocket connection (both sides), held frames unsent: the relay went away. */
  cut(): void {
    this.holding = false;
    for (const l of [...this.links]) {
      if (!l.ws) continue;
      l.held.length = 0;
      l.client.destroy();
      l.upstream.destroy();
      this.links.delete(l);
    }
  }

  async close(): Promise<void> {
    for (const l of this.links) {
      l.client.destroy();
      l.upstream.destroy();
    }
    this.links.clear();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private link(client: net.Socket, target: URL): void {
    const upstream = net.connect({ host: target.hostname, port: Number(target.port) });
    const l: Link = { client, upstream, ws: false, open: false, held: [] };
    this.links.add(l);
    const drop = () => {
      this.links.delete(l);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', drop);
    upstream.on('error', drop);
    client.on('close', drop);
    upstream.on('close', drop);
    client.on('data', (chunk: Buffer) => {
      if (!l.open && /^upgrade:\s*websocket/im.test(chunk.toString('latin1'))) l.ws = true;
      if (l.ws && l.open && (this.holding || l.held.length > 0)) l.held.push(chunk);
      else upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      l.open = true;
      client.write(chunk);
    });
  }
}
