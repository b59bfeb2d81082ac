import { performance } from 'node:perf_hooks';
import { WebSocket } from 'ws';
import type { RawData } from 'ws';
import { closeQuietly, measuredWindow, openLoadSocket, percentiles } from './ws-load.js';
import type { LatencySummary } from './ws-load.js';
import { seededRandom } from '../util/random.js';

/**
 * The Nostr read load: what most of a public relay's traffic is. Each connection asks for a
 * page of stored events (a REQ, the events, EOSE, then CLOSE) and asks again once the page is
 * whole, one subscription at a time, every REQ under a new subscription id.
 */
export interface NostrReadOptions {
  /** ws://... of a relay or a gateway. */
  url: string;
  connections: number;
  durationSec: number;
  /** What the relay holds: kind 1 events dated `firstCreatedAt` + 0 .. stored - 1. */
  stored: { count: number; firstCreatedAt: number };
  /** Events a page asks for (the REQ's limit); every page the relay answers whole has this many. */
  limit: number;
  /** Seeds which page each REQ asks for. */
  seed: number;
  headersFor(conn: number): Record<string, string>;
  onProgress?(elapsedSec: number): void;
}

export interface NostrReadResult {
  wallSeconds: number;
  counts: {
    /** REQs answered with EOSE (a whole page or not: see short). */
    requests: number;
    /** EVENT frames received for the subscription open. */
    events: number;
    /** Pages that ended (EOSE) with fewer events than asked for. */
    short: number;
    /** REQs answered CLOSED "rate-limited:". */
    limited: number;
    /** REQs answered CLOSED for any other reason. */
    closed: number;
    notices: number;
    /** Connections that failed to open, errored or closed before the end. */
    errors: number;
    /** REQs with no EOSE in time (the relay never finished the page): see STALL_MS. */
    timeouts: number;
  };
  /** REQ to EOSE, in ms, of every REQ counted in requests; null when there were none. */
  latencyMs: LatencySummary | null;
}

/**
 * A REQ with no EOSE after this is counted as a timeout, and its connection asks the next one:
 * nostr-rs-relay 0.8.12 drops a query without EOSE when a WAL checkpoint starts during it.
 */
export const STALL_MS = 2000;

/** The REQ frame for a page ending at `until` (newest first, `limit` of them). */
export function pageRequest(subId: string, until: number, limit: number): string {
  return JSON.stringify(['REQ', subId, { kinds: [1], until, limit }]);
}

function head(data: RawData): string {
  const buf = Buffer.isBuffer(data)
    ? data
    : Array.isArray(data)
      ? Buffer.concat(data)
      : Buffer.from(data);
  return buf.toString('utf8', 0, Math.min(buf.length, 200));
}

export async function runNostrReads(opts: NostrReadOptions): Promise<NostrReadResult> {
  const { stored, limit } = opts;
  if (stored.count < limit) throw new Error('runNostrReads: the relay holds less than one page');
  const random = seededRandom(opts.seed);
  const counts = {
    requests: 0,
    events: 0,
    short: 0,
    limited: 0,
    closed: 0,
    notices: 0,
    errors: 0,
    timeouts: 0,
  };
  const latencies: number[] = [];
  let asking = false;
  let finished = false;
  let nextSub = 0;

  interface Conn {
    ws: WebSocket;
    page?: {
      subId: string;
      eventHead: string;
      sentAt: number;
      events: number;
      timer: NodeJS.Timeout;
    };
    dead: boolean;
  }
  const conns: Conn[] = [];

  const endPage = (conn: Conn) => {
    const page = conn.page!;
    clearTimeout(page.timer);
    conn.page = undefined;
    if (conn.ws.readyState === WebSocket.OPEN) conn.ws.send(JSON.stringify(['CLOSE', page.subId]));
    ask(conn);
  };

  const ask = (conn: Conn) => {
    if (!asking || conn.dead || conn.ws.readyState !== WebSocket.OPEN) return;
    // A page anywhere in what is stored: `until` at least limit - 1 past the first, so it is whole.
    const until =
      stored.firstCreatedAt + limit - 1 + Math.floor(random() * (stored.count - limit + 1));
    const subId = `r${nextSub++}`;
    const timer = setTimeout(() => {
      counts.timeouts++;
      endPage(conn);
    }, STALL_MS);
    conn.page = {
      subId,
      eventHead: `["EVENT","${subId}",`,
      sentAt: performance.now(),
      events: 0,
      timer,
    };
    conn.ws.send(pageRequest(subId, until, limit));
  };

  const onMessage = (conn: Conn, data: RawData) => {
    const text = head(data);
    if (text.startsWith('["NOTICE"')) {
      counts.notices++;
      return;
    }
    const page = conn.page;
    // Only the open subscription's frames count (a late one of a timed-out page does not). The
    // relays measured write compact JSON, so the prefix names the subscription exactly.
    if (!page) return;
    if (text.startsWith(page.eventHead)) {
      page.events++;
    } else if (text.startsWith(`["EOSE","${page.subId}"`)) {
      latencies.push(performance.now() - page.sentAt);
      counts.requests++;
      counts.events += page.events;
      if (page.events < limit) counts.short++;
      endPage(conn);
    } else if (text.startsWith(`["CLOSED","${page.subId}"`)) {
      if (text.includes('"rate-limited:')) counts.limited++;
      else counts.closed++;
      endPage(conn);
    }
  };

  const fail = (conn: Conn) => {
    if (conn.dead) return;
    conn.dead = true;
    if (conn.page) clearTimeout(conn.page.timer);
    conn.page = undefined;
    if (!finished) counts.errors++;
  };

  const open = async (index: number): Promise<void> => {
    // Known once open: a failure before that is counted here, one after by fail().
    const opened: { conn?: Conn } = {};
    const ws = await openLoadSocket(opts.url, opts.headersFor(index), {
      onMessage: (data) => onMessage(opened.conn!, data),
      onGone: () => (opened.conn ? fail(opened.conn) : counts.errors++),
    });
    if (ws) conns.push((opened.conn = { ws, dead: false }));
  };

  await Promise.all(Array.from({ length: opts.connections }, (_, i) => open(i)));

  asking = true;
  const wallSeconds = await measuredWindow(
    opts.durationSec,
    (s) => opts.onProgress?.(s),
    () => {
      for (const conn of conns) ask(conn);
    },
  );
  asking = false;
  finished = true;
  // A page still coming at the end is neither answered nor a timeout: the window closed on it.
  for (const conn of conns) {
    if (conn.page) clearTimeout(conn.page.timer);
    conn.page = undefined;
  }
  await Promise.all(conns.map(closeQuietly));
  return { wallSeconds, counts, latencyMs: percentiles(latencies) };
}
