/**
 * The OOM benchmark's write floods, open loop: writes are due at the offered rate whatever
 * the relay does (a stalled relay does not slow the flood, as real clients do not wait for
 * it), each event signed as it is sent, each answer sorted by kind, and every event the
 * writer was told was stored kept for the read-back after a kill.
 *
 * Two shapes: `heavy`, one identity far over the relay's drain (its quota 3 x the sustainable
 * rate), and `spam`, many identities each far under its quota, adding up to the same flood.
 */
import { randomBytes } from 'node:crypto';
import { initNostrWasm } from 'nostr-wasm';
import { authorKey } from '../run/fresh-events.js';

import type { FloodShape } from './names.js';

export type { FloodShape };

/** How a write ended, as a client sees it. */
export type Outcome =
  /** Stored: HTTP 2xx with accepted true, or OK true. */
  | 'ok'
  /** HTTP 2xx or OK false for any other reason than the ones below (e.g. invalid). */
  | 'refused'
  /** HTTP 429, or OK false "rate-limited:". */
  | 'limited'
  /** HTTP 5xx, or OK false "error:" (the relay is down, or the gateway failed). */
  | 'server'
  /** Another 4xx. */
  | 'client'
  /** No answer: the connection failed, closed or timed out. */
  | 'error';

export interface Answer {
  outcome: Outcome;
  /** HTTP status, or the OK prefix over WebSocket, for the breakdown. */
  code: string;
}

export interface SignedEvent {
  id: string;
  json: string;
}

/** Sends one identity's event and says what came back (HTTP or WebSocket). */
export interface FloodTransport {
  send(identity: number, event: SignedEvent): Promise<Answer>;
  close(): Promise<void>;
}

/** A loopback source address per identity: the heavy writer 127.0.0.3, the wave 127.1.x.y. */
export function identityAddress(shape: FloodShape, identity: number): string {
  if (shape === 'heavy') return '127.0.0.3';
  return `127.1.${Math.floor(identity / 250)}.${(identity % 250) + 1}`;
}

export interface FloodCounts {
  /** Writes due and sent. */
  sent: number;
  /** Writes due but not sent: the in-flight bound was full (the flood is bounded). */
  unsent: number;
  ok: number;
  refused: number;
  limited: number;
  server: number;
  client: number;
  error: number;
  /** Every code seen (HTTP status or OK prefix), with its count. */
  codes: Record<string, number>;
}

export interface Acked {
  id: string;
  /** Seconds from the flood's start when the writer was told it was stored. */
  t: number;
}

export interface FloodOptions {
  shape: FloodShape;
  identities: number;
  contentBytes: number;
  seed: number;
  maxInFlight: number;
  transport: FloodTransport;
}

/** A flood's counts before it sends anything. */
export function emptyFloodCounts(): FloodCounts {
  return {
    sent: 0,
    unsent: 0,
    ok: 0,
    refused: 0,
    limited: 0,
    server: 0,
    client: 0,
    error: 0,
    codes: {},
  };
}

export class Flood {
  readonly counts: FloodCounts = emptyFloodCounts();
  readonly acked: Acked[] = [];
  private inFlight = 0;
  private next = 0;
  /** Events signed: each gets its own counter tag, so no two share an id. */
  private signed = 0;
  private readonly nonce = randomBytes(4).toString('hex');
  private readonly keys = new Map<number, Uint8Array>();
  private readonly content: string;
  private t0 = performance.now();

  private constructor(
    private readonly o: FloodOptions,
    private readonly nw: Awaited<ReturnType<typeof initNostrWasm>>,
  ) {
    this.content = 'x'.repeat(o.contentBytes);
  }

  static async create(o: FloodOptions): Promise<Flood> {
    return new Flood(o, await initNostrWasm());
  }

  /** Bytes one event takes in the relay's data file (its JSON and a newline). */
  static async storedBytes(contentBytes: number): Promise<number> {
    const flood = new Flood(
      {
        shape: 'heavy',
        identities: 1,
        contentBytes,
        seed: 1,
        maxInFlight: 1,
        transport: {
          send: () => Promise.resolve({ outcome: 'ok', code: '' }),
          close: () => Promise.resolve(),
        },
      },
      await initNostrWasm(),
    );
    return Buffer.byteLength(flood.sign(0).json) + 1;
  }

  /** An event of `identity`'s key, new (a counter tag), dated now. */
  sign(identity: number): SignedEvent {
    let sk = this.keys.get(identity);
    if (!sk) {
      sk = authorKey(this.o.seed, identity);
      this.keys.set(identity, sk);
    }
    const event = {
      kind: 1,
      created_at: Math.floor(Date.now() / 1000),
      tags: [['n', `${this.nonce}-${this.signed++}`]],
      content: this.content,
      pubkey: '',
      id: '',
      sig: '',
    };
    this.nw.finalizeEvent(event, sk);
    return { id: event.id, json: JSON.stringify(event) };
  }

  get acknowledged(): number {
    return this.acked.length;
  }

  /** Seconds since run() started: the clock of `acked` times. */
  elapsed(): number {
    return (performance.now() - this.t0) / 1000;
  }

  /**
   * Offer writes at `rateAt(t)` per second (t: seconds since start) until `durationSec` or
   * `signal`; then wait (up to `graceMs`) for the answers still in flight.
   */
  async run(
    rateAt: (t: number) => number,
    durationSec: number,
    signal?: AbortSignal,
    graceMs = 12_000,
  ): Promise<void> {
    this.t0 = performance.now();
    let due = 0;
    let last = this.t0;
    await new Promise<void>((resolve) => {
      const timer = setInterval(() => {
        const now = performance.now();
        const t = (now - this.t0) / 1000;
        if (t >= durationSec || signal?.aborted) {
          clearInterval(timer);
          resolve();
          return;
        }
        due += (rateAt(t) * (now - last)) / 1000;
        last = now;
        while (due >= 1) {
          due--;
          if (this.inFlight >= this.o.maxInFlight) this.counts.unsent++;
          else this.fire();
        }
      }, 5);
    });
    const end = performance.now() + graceMs;
    while (this.inFlight > 0 && performance.now() < end) {
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  private fire(): void {
    const seq = this.next++;
    // Heavy: one identity. Spam: each identity in turn, so each writes rarely.
    const identity = this.o.shape === 'heavy' ? 0 : seq % this.o.identities;
    const event = this.sign(identity);
    this.counts.sent++;
    this.inFlight++;
    void this.o.transport.send(identity, event).then(
      (answer) => this.record(event, answer),
      () => this.record(event, { outcome: 'error', code: 'exception' }),
    );
  }

  private record(event: SignedEvent, answer: Answer): void {
    this.inFlight--;
    this.counts[answer.outcome]++;
    this.counts.codes[answer.code] = (this.counts.codes[answer.code] ?? 0) + 1;
    if (answer.outcome === 'ok') {
      this.acked.push({ id: event.id, t: (performance.now() - this.t0) / 1000 });
    }
  }
}
