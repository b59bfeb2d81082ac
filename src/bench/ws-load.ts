import { performance } from 'node:perf_hooks';
import { WebSocket } from 'ws';
import type { RawData } from 'ws';
import type { FreshEvents } from './run/fresh-events.js';

/**
 * The Nostr load: many WebSocket connections, each sending one EVENT at a time and waiting
 * for its OK before the next (like autocannon's default pipelining of 1).
 */
export interface NostrLoadOptions {
  /** ws://... of a relay or a gateway. */
  url: string;
  connections: number;
  durationSec: number;
  /** Serialized signed Nostr events (JSON objects as text), sent round robin. */
  events: string[];
  /**
   * Instead of `events`: events sent once each, in order, shared by all connections (and by
   * successive calls: the warm-up, then the window). When they run out the load stops
   * sending and the result says `exhausted`: it never wraps around to ids already sent.
   */
  fresh?: FreshEvents;
  /** Headers of connection `conn`'s upgrade request, e.g. X-Forwarded-For. */
  headersFor(conn: number): Record<string, string>;
  /** Called about once a second of the measured window. */
  onProgress?(elapsedSec: number): void;
}

export interface LatencySummary {
  p50: number;
  p90: number;
  p99: number;
  max: number;
  mean: number;
}

export interface NostrLoadResult {
  /** The measured sending window: from all connections open to the stop. */
  wallSeconds: number;
  counts: {
    /** OK frames received for the event in flight. */
    requests: number;
    /** OK true. */
    ok: number;
    /** Of those, OK true with a "duplicate:" message (the event was known already). */
    duplicates: number;
    /** OK false with a "rate-limited:" message. */
    limited: number;
    /** Any other OK false. */
    otherRejected: number;
    notices: number;
    /** Connections that failed to open, errored or closed before the end. */
    errors: number;
    /** EVENTs with no OK by the end of the window plus the grace period. */
    timeouts: number;
  };
  /** Send to OK, in ms, of every OK counted in requests; null when there were none. */
  latencyMs: LatencySummary | null;
  /** `fresh` ran out before the end: some connections had nothing left to send. */
  exhausted: boolean;
  /** With `fresh`: the index of each event answered OK true other than duplicate (stored). */
  stored: number[];
}

/** How long after the window outstanding OKs are awaited. */
export const GRACE_MS = 2000;
const CONNECT_TIMEOUT_MS = 10_000;
const CLOSE_TIMEOUT_MS = 1000;

/**
 * Exact percentiles of a list (nearest rank: the smallest value with at least p% of the
 * values at or below it), with the max and the mean. null for an empty list.
 */
export function percentiles(values: readonly number[]): LatencySummary | null {
  if (values.length === 0) return null;
  const sorted = Float64Array.from(values).sort();
  const n = sorted.length;
  const rank = (p: number) => sorted[Math.min(n, Math.max(1, Math.ceil((p / 100) * n))) - 1]!;
  let sum = 0;
  for (const v of sorted) sum += v;
  return { p50: rank(50), p90: rank(90), p99: rank(99), max: sorted[n - 1]!, mean: sum / n };
}

/** The event id of each pool entry, read once (frames are sent as the text given). */
function eventIds(events: readonly string[]): string[] {
  return events.map((text, i) => {
    const id = (JSON.parse(text) as { id?: unknown }).id;
    if (typeof id !== 'string') throw new Error(`events[${i}] has no id`);
    return id;
  });
}

function text(data: RawData): string {
  if (Buffer.isBuffer(data)) return data.toString('utf8');
  if (Array.isArray(data)) return Buffer.concat(data).toString('utf8');
  return Buffer.from(data).toString('utf8');
}

export async function runNostrLoad(opts: NostrLoadOptions): Promise<NostrLoadResult> {
  const { fresh } = opts;
  if (!fresh && opts.events.length === 0) throw new Error('runNostrLoad: the event pool is empty');
  const ids = fresh ? [] : eventIds(opts.events);
  const frames = fresh ? [] : opts.events.map((ev) => `["EVENT",${ev}]`);
  let exhausted = false;
  const counts = {
    requests: 0,
    ok: 0,
    duplicates: 0,
    limited: 0,
    otherRejected: 0,
    notices: 0,
    errors: 0,
    timeouts: 0,
  };
  const latencies: number[] = [];
  const stored: number[] = [];
  let sending = false;
  let finished = false;
  /** Resolved whenever a connection has nothing in flight any more (for the grace wait). */
  let onIdle: (() => void) | undefined;

  interface Conn {
    ws: WebSocket;
    next: number;
    inFlight?: { id: string; sentAt: number; index: number };
    dead: boolean;
  }

  const conns: Conn[] = [];

  const fail = (conn: Conn) => {
    if (conn.dead) return;
    conn.dead = true;
    // An event lost with its connection is part of that error, not a timeout.
    conn.inFlight = undefined;
    if (!finished) counts.errors++;
    onIdle?.();
  };

  const sendNext = (conn: Conn) => {
    if (!sending || conn.dead || conn.ws.readyState !== WebSocket.OPEN) return;
    let id: string;
    let frame: string;
    let index = -1;
    if (fresh) {
      if (fresh.next >= fresh.ids.length) {
        exhausted = true;
        return;
      }
      const i = fresh.next++;
      index = i;
      id = fresh.ids[i]!;
      frame = `["EVENT",${fresh.events[i]!}]`;
    } else {
      const i = conn.next;
      conn.next = (i + 1) % frames.length;
      id = ids[i]!;
      frame = frames[i]!;
    }
    conn.inFlight = { id, sentAt: performance.now(), index };
    conn.ws.send(frame, (err) => {
      if (err) fail(conn);
    });
  };

  const onMessage = (conn: Conn, data: RawData) => {
    let msg: unknown;
    try {
      msg = JSON.parse(text(data));
    } catch {
      return;
    }
    if (!Array.isArray(msg)) return;
    if (msg[0] === 'NOTICE') {
      counts.notices++;
      return;
    }
    const pending = conn.inFlight;
    if (msg[0] !== 'OK' || !pending || msg[1] !== pending.id) return;
    latencies.push(performance.now() - pending.sentAt);
    conn.inFlight = undefined;
    counts.requests++;
    if (msg[2] === true) {
      counts.ok++;
      if (typeof msg[3] === 'string' && msg[3].startsWith('duplicate:')) counts.duplicates++;
      else if (pending.index >= 0) stored.push(pending.index);
    } else if (typeof msg[3] === 'string' && msg[3].startsWith('rate-limited:')) counts.limited++;
    else counts.otherRejected++;
    if (sending) sendNext(conn);
    else onIdle?.();
  };

  const open = async (index: number): Promise<void> => {
    // Known once open: a failure before that is counted here, one after by fail().
    const opened: { conn?: Conn } = {};
    const ws = await openLoadSocket(opts.url, opts.headersFor(index), {
      onMessage: (data) => onMessage(opened.conn!, data),
      onGone: () => (opened.conn ? fail(opened.conn) : counts.errors++),
    });
    if (!ws) return;
    const conn: Conn = (opened.conn = {
      ws,
      next: fresh
        ? 0
        : (index * Math.max(1, Math.floor(frames.length / opts.connections))) % frames.length,
      dead: false,
    });
    conns.push(conn);
  };

  await Promise.all(Array.from({ length: opts.connections }, (_, i) => open(i)));

  // The measured window starts with every connection open (or failed).
  sending = true;
  const wallSeconds = await measuredWindow(
    opts.durationSec,
    (s) => opts.onProgress?.(s),
    () => {
      for (const conn of conns) sendNext(conn);
    },
  );
  sending = false;

  // Wait for the OKs still outstanding, up to the grace period.
  const outstanding = () => conns.filter((c) => !c.dead && c.inFlight).length;
  const graceEnd = performance.now() + GRACE_MS;
  while (outstanding() > 0 && performance.now() < graceEnd) {
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, Math.max(1, graceEnd - performance.now()));
      onIdle = () => {
        clearTimeout(timer);
        resolve();
      };
    });
    onIdle = undefined;
  }
  counts.timeouts = outstanding();
  finished = true;

  await Promise.all(conns.map(closeQuietly));
  return { wallSeconds, counts, latencyMs: percentiles(latencies), exhausted, stored };
}

/**
 * One load connection: resolved with its socket once open, or undefined when it failed to
 * open (onGone has been called). onGone is called once when it errors or closes.
 */
export function openLoadSocket(
  url: string,
  headers: Record<string, string>,
  on: { onMessage(data: RawData): void; onGone(): void },
): Promise<WebSocket | undefined> {
  return new Promise((resolve) => {
    let ws: WebSocket;
    let opened = false;
    let gone = false;
    const goneOnce = () => {
      if (gone) return;
      gone = true;
      on.onGone();
      if (!opened) resolve(undefined);
    };
    try {
      ws = new WebSocket(url, {
        headers,
        perMessageDeflate: false,
        handshakeTimeout: CONNECT_TIMEOUT_MS,
      });
    } catch {
      return goneOnce();
    }
    ws.on('message', (data) => on.onMessage(data));
    ws.on('error', goneOnce);
    ws.on('close', goneOnce);
    ws.once('open', () => {
      opened = true;
      resolve(ws);
    });
  });
}

/** The measured window: `start`, then `durationSec` with progress about once a second; its wall seconds. */
export async function measuredWindow(
  durationSec: number,
  onProgress: ((elapsedSec: number) => void) | undefined,
  start: () => void,
): Promise<number> {
  const t0 = performance.now();
  start();
  const progress = onProgress
    ? setInterval(() => onProgress((performance.now() - t0) / 1000), 1000)
    : undefined;
  await new Promise<void>((resolve) => setTimeout(resolve, durationSec * 1000));
  if (progress) clearInterval(progress);
  return (performance.now() - t0) / 1000;
}

/** Close with 1000 and wait for the close handshake, briefly; then drop the socket. */
export function closeQuietly(conn: { ws: WebSocket }): Promise<void> {
  const { ws } = conn;
  if (ws.readyState === WebSocket.CLOSED) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      ws.terminate();
      resolve();
    }, CLOSE_TIMEOUT_MS);
    ws.once('close', () => {
      clearTimeout(timer);
      resolve();
    });
    try {
      if (ws.readyState === WebSocket.CONNECTING) ws.terminate();
      else ws.close(1000, 'load finished');
    } catch {
      ws.terminate();
    }
  });
}
