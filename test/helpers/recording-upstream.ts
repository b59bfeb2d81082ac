import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocketServer } from 'ws';

export interface RecordedRequest {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  /** The gateway's port on the connection it came on (a reused connection keeps it). */
  remotePort?: number;
  /** Its connection closed before it was answered (the gateway gave up on it). */
  abandoned?: boolean;
  /** The body bytes received so far. */
  body: Buffer;
}

/**
 * A stand-in relay in the test process that shows what the gateway sent it: every request
 * but the health checks is recorded, and requests whose body is still arriving are counted
 * (until the body ends or the connection drops). Answers 200 once the body has ended, with
 * `x-hop` named in its Connection header (a hop-by-hop header the gateway must not pass on),
 * except under /hang, never answered, /held (answered once the test calls release()), /huge
 * (a JSON document that does not end) and /not-json (HTML); WebSocket upgrades are accepted
 * and echo. A request whose connection closes before its answer is marked abandoned.
 */
export class RecordingUpstream {
  readonly requests: RecordedRequest[] = [];
  /** Requests whose body has neither ended nor been cut off by a closed connection. */
  bodiesInProgress = 0;
  private readonly wss = new WebSocketServer({ noServer: true });
  /** Requests under /held, answered by release(). */
  private held: (() => void)[] = [];

  private constructor(readonly server: http.Server) {
    server.on('request', (req, res) => this.handle(req, res));
    server.on('upgrade', (req, socket, head) => {
      this.wss.handleUpgrade(req, socket, head, (ws) => {
        ws.on('message', (data, binary) => ws.send(data, { binary }));
      });
    });
  }

  static async start(): Promise<RecordingUpstream> {
    const server = http.createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return new RecordingUpstream(server);
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  /** The last recorded request to `path` (query included). */
  last(path: string): RecordedRequest | undefined {
    return this.requests.filter((r) => r.url === path).pop();
  }

  /** Answer every request held under /held (those still connected). */
  release(): void {
    for (const answer of this.held.splice(0)) answer();
  }

  async close(): Promise<void> {
    for (const ws of this.wss.clients) ws.terminate();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    if (req.url === '/healthz') {
      res.end('{"status":"ok"}');
      return;
    }
    const record: RecordedRequest = {
      method: req.method ?? '',
      url: req.url ?? '',
      headers: req.headers,
      remotePort: req.socket.remotePort,
      body: Buffer.alloc(0),
    };
    this.requests.push(record);
    req.on('data', (chunk: Buffer) => {
      record.body = Buffer.concat([record.body, chunk]);
    });
    res.once('close', () => {
      if (!res.writableFinished) record.abandoned = true;
    });
    this.bodiesInProgress++;
    let counted = true;
    const settle = () => {
      if (counted) this.bodiesInProgress--;
      counted = false;
    };
    req.on('close', settle);
    req.on('end', () => {
      settle();
      if (req.url?.startsWith('/hang')) return; // a relay that takes the request and never answers
      if (req.url?.startsWith('/held')) {
        this.held.push(() => answer(req, res));
        return;
      }
      if (req.url?.startsWith('/huge')) return endlessJson(res);
      const status = /^\/status-(\d{3})/.exec(req.url ?? '');
      if (status) {
        res.statusCode = Number(status[1]);
        res.end(JSON.stringify({ url: req.url }));
        return;
      }
      if (req.url?.startsWith('/not-json')) {
        res.end('<html>not a relay document</html>');
        return;
      }
      answer(req, res);
    });
    req.resume();
  }
}

function answer(req: http.IncomingMessage, res: http.ServerResponse): void {
  if (res.destroyed) return;
  res.setHeader('connection', 'keep-alive, x-hop');
  res.setHeader('x-hop', 'for the gateway only');
  res.setHeader('content-type', 'application/json');
  res.end(JSON.stringify({ url: req.url }));
}

/** A JSON string streamed in 64 KiB chunks (no Content-Length) until the reader goes away. */
function endlessJson(res: http.ServerResponse): void {
  const chunk = 'x'.repeat(64 * 1024);
  res.setHeader('content-type', 'application/nostr+json');
  res.write('{"name":"');
  const more = () => {
    while (!res.destroyed && res.write(chunk));
    if (!res.destroyed) res.once('drain', more);
  };
  res.once('close', () => res.off('drain', more));
  more();
}
