import net from 'node:net';

export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/**
 * One raw TCP connection to an HTTP server, for what client libraries will not send
 * (absolute-form targets, hop-by-hop headers, half bodies, trickled headers). Responses are
 * parsed off the byte stream in order; interim (1xx) answers are skipped.
 */
export class RawConnection {
  readonly openedAt = Date.now();
  /** When the server closed (or reset) the connection; undefined while open. */
  closedAt: number | undefined;
  private buffer = Buffer.alloc(0);
  private wake: (() => void) | undefined;

  private constructor(readonly socket: net.Socket) {
    socket.on('data', (chunk: Buffer) => {
      this.buffer = Buffer.concat([this.buffer, chunk]);
      this.wake?.();
    });
    socket.on('error', () => {});
    socket.on('close', () => {
      this.closedAt = Date.now();
      this.wake?.();
    });
  }

  static open(url: string, from = '127.0.0.1'): Promise<RawConnection> {
    const { hostname, port } = new URL(url);
    return new Promise((resolve, reject) => {
      const socket = net.connect({ host: hostname, port: Number(port), localAddress: from });
      socket.once('connect', () => resolve(new RawConnection(socket)));
      socket.once('error', reject);
    });
  }

  get closed(): boolean {
    return this.closedAt !== undefined;
  }

  write(data: string | Buffer): void {
    if (!this.socket.destroyed) this.socket.write(data);
  }

  destroy(): void {
    this.socket.destroy();
  }

  /** The next final response, waited for with a deadline. */
  async response(timeoutMs = 10_000): Promise<RawResponse> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const parsed = this.parseOne();
      if (parsed && parsed.status >= 200) return parsed;
      if (parsed) continue;
      if (this.closed) throw new Error(`connection closed; unparsed: ${this.pending()}`);
      if (Date.now() > deadline)
        throw new Error(`no response in ${timeoutMs} ms: ${this.pending()}`);
      await this.wait(deadline);
    }
  }

  /** Wait until the server closes the connection; the milliseconds since it was opened. */
  async untilClosed(timeoutMs: number): Promise<number> {
    const deadline = Date.now() + timeoutMs;
    while (!this.closed) {
      if (Date.now() > deadline) throw new Error(`still open after ${timeoutMs} ms`);
      await this.wait(deadline);
    }
    return this.closedAt! - this.openedAt;
  }

  /** Everything received and not parsed as a response yet. */
  pending(): string {
    return JSON.stringify(this.buffer.toString('latin1').slice(0, 300));
  }

  private wait(deadline: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, Math.max(0, Math.min(100, deadline - Date.now())));
      this.wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }

  private parseOne(): RawResponse | undefined {
    const end = this.buffer.indexOf('\r\n\r\n');
    if (end < 0) return undefined;
    const [statusLine = '', ...lines] = this.buffer
      .subarray(0, end)
      .toString('latin1')
      .split('\r\n');
    const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine)?.[1] ?? NaN);
    if (!Number.isFinite(status)) throw new Error(`not an HTTP response: ${this.pending()}`);
    const headers: Record<string, string> = {};
    for (const line of lines) {
      const colon = line.indexOf(':');
      const name = line.slice(0, colon).trim().toLowerCase();
      const value = line.slice(colon + 1).trim();
      headers[name] = name in headers ? `${headers[name]}, ${value}` : value;
    }
    let rest = this.buffer.subarray(end + 4);
    if (status < 200) {
      this.buffer = rest;
      return { status, headers, body: '' };
    }
    let body: Buffer;
    if (headers['transfer-encoding']?.toLowerCase().includes('chunked')) {
      const chunks: Buffer[] = [];
      for (;;) {
        const lineEnd = rest.indexOf('\r\n');
        if (lineEnd < 0) return undefined;
        const size = parseInt(rest.subarray(0, lineEnd).toString('latin1'), 16);
        if (rest.length < lineEnd + 2 + size + 2) return undefined;
        chunks.push(rest.subarray(lineEnd + 2, lineEnd + 2 + size));
        rest = rest.subarray(lineEnd + 2 + size + 2);
        if (size === 0) break;
      }
      body = Buffer.concat(chunks);
    } else if (headers['content-length'] !== undefined) {
      const length = Number(headers['content-length']);
      if (rest.length < length) return undefined;
      body = rest.subarray(0, length);
      rest = rest.subarray(length);
    } else {
      // No length: the body runs to the close.
      if (!this.closed) return undefined;
      body = rest;
      rest = Buffer.alloc(0);
    }
    this.buffer = rest;
    return { status, headers, body: body.toString('utf8') };
  }
}

/** Send one raw request on a fresh connection and read its response. */
export async function rawRequest(
  url: string,
  text: string,
  from = '127.0.0.1',
): Promise<RawResponse> {
  const conn = await RawConnection.open(url, from);
  try {
    conn.write(text);
    return await conn.response();
  } finally {
    conn.destroy();
  }
}
