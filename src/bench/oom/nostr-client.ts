/**
 * A minimal Nostr client for the OOM benchmark: EVENTs pipelined on one WebSocket, each
 * resolved by its OK (or by the socket's end, or a deadline), and subscribers that never read.
 */
import { WebSocket } from 'ws';
import type { Answer } from './flood.js';

const CONNECT_TIMEOUT_MS = 10_000;

/** An OK's message as a client reads it (NIP-01 prefixes). */
export function classifyOk(accepted: boolean, message: string): Answer {
  const prefix = /^([a-z-]+):/.exec(message)?.[1] ?? '';
  if (accepted) return { outcome: 'ok', code: 'OK true' };
  const code = `OK false ${prefix || '(no prefix)'}`;
  if (prefix === 'rate-limited') return { outcome: 'limited', code };
  if (prefix === 'error') return { outcome: 'server', code };
  return { outcome: 'refused', code };
}

interface Pending {
  resolve(answer: Answer): void;
  timer: NodeJS.Timeout;
}

/** One WebSocket that sends EVENTs and matches OKs to them by id. */
export class NostrSocket {
  private readonly pending = new Map<string, Pending>();
  private closed = false;
  private markClosed!: () => void;
  /** Settles when the socket has ended, whoever ended it. */
  readonly ended = new Promise<void>((resolve) => (this.markClosed = resolve));

  private constructor(private readonly ws: WebSocket) {
    ws.on('message', (data: Buffer, isBinary: boolean) => {
      if (isBinary) return;
      let msg: unknown;
      try {
        msg = JSON.parse(data.toString('utf8'));
      } catch {
        return;
      }
      if (!Array.isArray(msg) || msg[0] !== 'OK' || typeof msg[1] !== 'string') return;
      this.settle(msg[1], classifyOk(msg[2] === true, typeof msg[3] === 'string' ? msg[3] : ''));
    });
    ws.on('close', (code) => this.end(`closed ${code}`));
    ws.on('error', () => this.end('socket error'));
  }

  /** Open a socket (from `localAddress`); a refused upgrade rejects with its HTTP status. */
  static open(url: string, localAddress?: string): Promise<NostrSocket> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url, {
        handshakeTimeout: CONNECT_TIMEOUT_MS,
        ...(localAddress ? { localAddress } : {}),
        perMessageDeflate: false,
      });
      ws.once('open', () => {
        ws.removeAllListeners('unexpected-response');
        resolve(new NostrSocket(ws));
      });
      ws.once('unexpected-response', (_req, res) => {
        res.resume();
        ws.terminate();
        reject(new UpgradeRefused(res.statusCode ?? 0));
      });
      ws.once('error', (err) => reject(err));
    });
  }

  get isOpen(): boolean {
    return !this.closed && this.ws.readyState === WebSocket.OPEN;
  }

  /** Send an EVENT (its JSON) and wait for its OK, the socket's end, or `timeoutMs`. */
  send(id: string, eventJson: string, timeoutMs = 10_000): Promise<Answer> {
    if (!this.isOpen) return Promise.resolve({ outcome: 'error', code: 'socket closed' });
    return new Promise((resolve) => {
      const timer = setTimeout(
        () => this.settle(id, { outcome: 'error', code: 'no OK' }),
        timeoutMs,
      );
      this.pending.set(id, { resolve, timer });
      this.ws.send(`["EVENT",${eventJson}]`);
    });
  }

  /** A subscription to every new event of `kinds`; the caller may then stop reading. */
  subscribe(subId: string, kinds: number[]): void {
    this.ws.send(JSON.stringify(['REQ', subId, { kinds, limit: 0 }]));
  }

  /** Stop reading from the socket: the relay's writes to it back up (a slow reader). */
  stopReading(): void {
    this.ws.pause();
  }

  close(): void {
    this.ws.terminate();
    this.end('closed by client');
  }

  private settle(id: string, answer: Answer): void {
    const p = this.pending.get(id);
    if (!p) return;
    clearTimeout(p.timer);
    this.pending.delete(id);
    p.resolve(answer);
  }

  private end(why: string): void {
    this.closed = true;
    this.markClosed();
    for (const id of [...this.pending.keys()]) this.settle(id, { outcome: 'error', code: why });
  }
}

export class UpgradeRefused extends Error {
  override name = 'UpgradeRefused';
  constructor(readonly status: number) {
    super(`WebSocket upgrade refused: HTTP ${status}`);
  }
}
