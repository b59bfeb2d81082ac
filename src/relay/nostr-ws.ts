import type { NostrEvent } from 'nostr-tools/pure';
import { WebSocket } from 'ws';
import { authEventProblem, newChallenge } from '../nostr/nip42.js';
import type { RawData } from 'ws';
import { FilterError, matchesEvent, parseFilter } from './filter.js';
import type { Filter } from './filter.js';
import type { IndexStore } from './index-store.js';
import type { EventStore } from './store.js';
import { checkEvent } from './validate.js';

export interface NostrLimits {
  maxSubscriptions: number;
  maxFilters: number;
}

/** NIP-42: the URL clients reach this relay by (the AUTH event's relay tag). */
export interface NostrAuth {
  publicUrl: string;
}

/** An AUTH event is a few hundred bytes: anything far larger is not one. */
const MAX_AUTH_EVENT_BYTES = 16 * 1024;

interface Subscription {
  filters: Filter[];
  /** Live events that arrived while the stored ones were being read; sent after EOSE. */
  pending: string[] | undefined;
}

interface Connection {
  ws: WebSocket;
  subs: Map<string, Subscription>;
  /** NIP-42: the challenge sent on connect (when AUTH is on). */
  challenge?: string;
}

/**
 * NIP-01 over WebSocket: EVENT, REQ (stored events, EOSE, then live ones) and CLOSE; with
 * `auth`, NIP-42: a challenge on connect and AUTH answered OK (nothing is restricted by it).
 */
export class NostrSockets {
  private readonly connections = new Set<Connection>();

  constructor(
    private readonly store: EventStore,
    private readonly index: IndexStore,
    private readonly limits: NostrLimits,
    private readonly auth?: NostrAuth,
  ) {
    store.onStored((event, json) => this.broadcast(event, json));
  }

  get connectionCount(): number {
    return this.connections.size;
  }

  get subscriptionCount(): number {
    let total = 0;
    for (const conn of this.connections) total += conn.subs.size;
    return total;
  }

  handle(ws: WebSocket): void {
    const conn: Connection = { ws, subs: new Map() };
    this.connections.add(conn);
    if (this.auth) {
      conn.challenge = newChallenge();
      send(ws, ['AUTH', conn.challenge]);
    }
    ws.on('message', (data) => this.onMessage(conn, data));
    ws.on('close', () => this.connections.delete(conn));
    ws.on('error', () => ws.terminate());
  }

  /** Close every connection with `code`, waiting up to `graceMs` before cutting the rest. */
  async closeAll(code = 1001, reason = 'relay shutting down', graceMs = 1000): Promise<void> {
    const closing = [...this.connections].map(
      ({ ws }) =>
        new Promise<void>((resolve) => {
          if (ws.readyState === WebSocket.CLOSED) return resolve();
          ws.once('close', () => resolve());
          ws.close(code, reason);
        }),
    );
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.all(closing),
      new Promise((resolve) => (timer = setTimeout(resolve, graceMs))),
    ]);
    clearTimeout(timer);
    for (const { ws } of this.connections) ws.terminate();
  }

  private onMessage(conn: Connection, data: RawData): void {
    let msg: unknown;
    try {
      msg = JSON.parse(text(data));
    } catch {
      return send(conn.ws, ['NOTICE', 'invalid: message is not valid JSON']);
    }
    if (!Array.isArray(msg) || typeof msg[0] !== 'string') {
      return send(conn.ws, ['NOTICE', 'invalid: a message is a JSON array starting with a verb']);
    }
    switch (msg[0]) {
      case 'EVENT':
        return this.onEvent(conn, msg);
      case 'REQ':
        this.onReq(conn, msg).catch((err: unknown) => {
          send(conn.ws, ['NOTICE', `error: ${err instanceof Error ? err.message : String(err)}`]);
        });
        return;
      case 'CLOSE':
        return this.onClose(conn, msg);
      case 'AUTH':
        if (this.auth && conn.challenge) return this.onAuth(conn, msg[1], this.auth);
        return send(conn.ws, ['NOTICE', 'invalid: this relay does not ask for AUTH']);
      default:
        return send(conn.ws, ['NOTICE', `invalid: unsupported message type "${msg[0]}"`]);
    }
  }

  private onEvent(conn: Connection, msg: unknown[]): void {
    if (msg.length < 2) {
      return send(conn.ws, ['OK', '', false, 'invalid: EVENT needs an event']);
    }
    let result;
    try {
      result = this.store.submit(msg[1]);
    } catch (err) {
      const id = (msg[1] as { id?: unknown } | null)?.id;
      const message = `error: ${err instanceof Error ? err.message : String(err)}`;
      return send(conn.ws, ['OK', typeof id === 'string' ? id : '', false, message]);
    }
    if (!result.accepted) return send(conn.ws, ['OK', result.id, false, result.message]);
    const message = result.duplicate ? 'duplicate: already have this event' : '';
    send(conn.ws, ['OK', result.id, true, message]);
  }

  private onAuth(conn: Connection, raw: unknown, auth: NostrAuth): void {
    const verdict = checkEvent(raw, MAX_AUTH_EVENT_BYTES);
    if (!verdict.ok) return send(conn.ws, ['OK', verdict.id, false, verdict.message]);
    const problem = authEventProblem(verdict.event, {
      challenge: conn.challenge!,
      relayUrl: auth.publicUrl,
      nowSec: Math.floor(Date.now() / 1000),
    });
    send(conn.ws, ['OK', verdict.event.id, !problem, problem ? `invalid: ${problem}` : '']);
  }

  private async onReq(conn: Connection, msg: unknown[]): Promise<void> {
    const subId = msg[1];
    if (typeof subId !== 'string' || subId.length === 0 || subId.length > 64) {
      return send(conn.ws, [
        'NOTICE',
        'invalid: REQ needs a subscription id (a string of 1 to 64 characters)',
      ]);
    }
    const closed = (message: string) => send(conn.ws, ['CLOSED', subId, message]);
    const raw = msg.slice(2);
    if (raw.length === 0) return closed('invalid: REQ needs at least one filter');
    if (raw.length > this.limits.maxFilters) {
      return closed(`invalid: at most ${this.limits.maxFilters} filters per REQ`);
    }
    let filters: Filter[];
    try {
      filters = raw.map(parseFilter);
    } catch (err) {
      if (err instanceof FilterError) return closed(`invalid: ${err.message}`);
      throw err;
    }
    if (!conn.subs.has(subId) && conn.subs.size >= this.limits.maxSubscriptions) {
      return closed(`error: too many subscriptions (at most ${this.limits.maxSubscriptions})`);
    }
    // Registered before the query so nothing stored meanwhile is missed.
    const sub: Subscription = { filters, pending: [] };
    conn.subs.set(subId, sub);
    let stored: string[];
    try {
      stored = await this.index.query(filters);
    } catch (err) {
      if (conn.subs.get(subId) === sub) conn.subs.delete(subId);
      return closed(`error: ${err instanceof Error ? err.message : String(err)}`);
    }
    if (conn.subs.get(subId) !== sub) return; // closed or replaced meanwhile
    const prefix = `["EVENT",${JSON.stringify(subId)},`;
    for (const json of stored) sendRaw(conn.ws, prefix + json + ']');
    send(conn.ws, ['EOSE', subId]);
    for (const frame of sub.pending ?? []) sendRaw(conn.ws, frame);
    sub.pending = undefined;
  }

  private onClose(conn: Connection, msg: unknown[]): void {
    if (typeof msg[1] !== 'string') {
      return send(conn.ws, ['NOTICE', 'invalid: CLOSE needs a subscription id']);
    }
    conn.subs.delete(msg[1]);
  }

  private broadcast(event: NostrEvent, json: string): void {
    for (const conn of this.connections) {
      for (const [subId, sub] of conn.subs) {
        if (!sub.filters.some((f) => matchesEvent(f, event))) continue;
        const frame = `["EVENT",${JSON.stringify(subId)},${json}]`;
        if (sub.pending) sub.pending.push(frame);
        else sendRaw(conn.ws, frame);
      }
    }
  }
}

function text(data: RawData): string {
  if (Buffer.isBuffer(data)) return data.toString('utf8');
  if (Array.isArray(data)) return Buffer.concat(data).toString('utf8');
  return Buffer.from(data).toString('utf8');
}

function send(ws: WebSocket, message: unknown[]): void {
  sendRaw(ws, JSON.stringify(message));
}

function sendRaw(ws: WebSocket, frame: string): void {
  if (ws.readyState === WebSocket.OPEN) ws.send(frame);
}
