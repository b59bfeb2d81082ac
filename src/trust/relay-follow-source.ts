/**
 * Follow lists (kind 3) read from a relay over its own WebSocket: one connection, one REQ at a
 * time, each answered until EOSE. Everything the relay sends is bounded: a frame over
 * `maxEventBytes` ends the connection (ws closes it, 1009) and the batch is asked again in
 * halves until the one author whose list is too large is left out; at most `limit` events a
 * REQ are kept (authors a truncated answer left out are asked again); frames that are not
 * JSON, or not this REQ's, are ignored; every REQ ends at the refresh's deadline. A frame is
 * parsed only if the heap has room for it (PARSE_ROOM), else the walk fails.
 */
import { getHeapStatistics } from 'node:v8';
import WebSocket from 'ws';

/**
 * Heap bytes a frame's parse may take, per byte of the frame: its text (up to 2 bytes a
 * character) and what JSON.parse builds, up to 21 bytes a byte measured (`[{},{},...]`; a
 * follow list's p-tags, 2). A worker at its heap limit is stopped at its next interrupt check,
 * with 16 MB more (Node) to get there; one large allocation past that, such as a big frame's
 * text or parse in a small heap, is V8's fatal out-of-memory of the whole process, not
 * ERR_WORKER_OUT_OF_MEMORY (seen: a 9 MB frame in a 12 MB worker heap, one run in three). So
 * the room is checked before a frame is decoded.
 */
export const PARSE_ROOM = 32;

export interface RelaySourceOptions {
  url: string;
  /** The largest frame read: a longer one ends the connection. */
  maxEventBytes: number;
  /** Events a REQ asks for (its filter's limit) and keeps at most. */
  limit: number;
  /** When every REQ of this refresh gives up (ms since the epoch). */
  deadline: number;
  now?: () => number;
}

export class RelayTimeout extends Error {
  override name = 'RelayTimeout';
}
class Oversize extends Error {
  override name = 'Oversize';
}
export class OutOfRoom extends Error {
  override name = 'OutOfRoom';
}

interface Pending {
  subId: string;
  events: unknown[];
  done: (err?: Error) => void;
}

export class RelayFollowSource {
  private socket: WebSocket | undefined;
  private opening: Promise<WebSocket> | undefined;
  private pending: Pending | undefined;
  private nextSub = 0;
  /** Authors whose list was over maxEventBytes: left out of this walk. */
  oversized = 0;
  /** REQs sent (re-asks and halves included). */
  requests = 0;
  private closedForGood = false;

  constructor(private readonly opts: RelaySourceOptions) {}

  /** The latest follow lists the relay holds of `authors`, as answered (see follow-graph.ts). */
  async fetch(authors: readonly string[]): Promise<unknown[]> {
    try {
      return await this.answered(authors);
    } catch (err) {
      if (!(err instanceof Oversize)) throw err;
      if (authors.length === 1) {
        this.oversized++;
        return [];
      }
      const half = Math.ceil(authors.length / 2);
      return [
        ...(await this.fetch(authors.slice(0, half))),
        ...(await this.fetch(authors.slice(half))),
      ];
    }
  }

  /** End the walk's connection; a later REQ opens another unless `for good`. */
  close(forGood = false): void {
    if (forGood) this.closedForGood = true;
    this.socket?.terminate();
    this.socket = undefined;
  }

  /** Every author asked until answered, or until an answer under the limit says none is left. */
  private async answered(authors: readonly string[]): Promise<unknown[]> {
    const all: unknown[] = [];
    let left = authors;
    while (left.length > 0) {
      const answer = await this.req(left);
      all.push(...answer);
      if (answer.length < this.opts.limit) break;
      const seen = new Set(answer.map((e) => (e as { pubkey?: unknown }).pubkey));
      const rest = left.filter((a) => !seen.has(a));
      // A full answer naming none of the authors asked: nothing more can be learnt from it.
      if (rest.length === left.length) break;
      left = rest;
    }
    return all;
  }

  private async req(authors: readonly string[]): Promise<unknown[]> {
    const socket = await this.open();
    const subId = `trust${this.nextSub++}`;
    this.requests++;
    return new Promise<unknown[]>((resolve, reject) => {
      const timer = setTimeout(
        () => finish(new RelayTimeout('the relay did not answer before the refresh deadline')),
        this.remaining(),
      );
      const finish = (err?: Error) => {
        clearTimeout(timer);
        this.pending = undefined;
        if (err) {
          this.close();
          reject(err);
          return;
        }
        if (socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify(['CLOSE', subId]));
        resolve(pending.events);
      };
      const pending: Pending = { subId, events: [], done: finish };
      this.pending = pending;
      const filter = { kinds: [3], authors, limit: this.opts.limit };
      socket.send(JSON.stringify(['REQ', subId, filter]));
    });
  }

  private remaining(): number {
    return Math.max(0, this.opts.deadline - (this.opts.now ?? Date.now)());
  }

  private open(): Promise<WebSocket> {
    if (this.closedForGood) return Promise.reject(new Error('the walk was stopped'));
    if (this.socket?.readyState === WebSocket.OPEN) return Promise.resolve(this.socket);
    this.opening ??= new Promise<WebSocket>((resolve, reject) => {
      const socket = new WebSocket(this.opts.url, {
        maxPayload: this.opts.maxEventBytes,
        perMessageDeflate: false,
        handshakeTimeout: Math.max(1, this.remaining()),
      });
      socket.on('open', () => {
        this.socket = socket;
        resolve(socket);
      });
      socket.on('message', (data, isBinary) => {
        if (isBinary || this.pending === undefined) return;
        const bytes = (data as Buffer).length;
        const heap = getHeapStatistics();
        if (heap.used_heap_size + bytes * PARSE_ROOM < heap.heap_size_limit) {
          this.frame((data as Buffer).toString('utf8'));
          return;
        }
        const limitMb = Math.round(heap.heap_size_limit / 2 ** 20);
        this.ended(
          new OutOfRoom(`a frame of ${bytes} bytes has no room in the heap (${limitMb} MB)`),
        );
      });
      socket.on('error', (err: Error & { code?: string }) => {
        const oversize = err.code === 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH';
        this.ended(oversize ? new Oversize(err.message) : err);
        reject(err);
      });
      socket.on('close', () => this.ended(new Error('the relay closed the connection')));
    }).finally(() => {
      this.opening = undefined;
    });
    return this.opening;
  }

  private ended(err: Error): void {
    this.socket = undefined;
    this.pending?.done(err);
  }

  private frame(text: string): void {
    const pending = this.pending;
    if (pending === undefined) return;
    let msg: unknown;
    try {
      msg = JSON.parse(text);
    } catch {
      return; // Not JSON: ignored.
    }
    if (!Array.isArray(msg) || msg[1] !== pending.subId) return;
    if (msg[0] === 'EVENT') {
      if (pending.events.length < this.opts.limit) pending.events.push(msg[2]);
      else pending.done(); // A relay past the limit it was asked for: the answer is full.
    } else if (msg[0] === 'EOSE' || msg[0] === 'CLOSED') {
      pending.done();
    }
  }
}
