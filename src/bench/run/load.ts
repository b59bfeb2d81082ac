/**
 * The load of a run, whatever drives it: closed-loop HTTP, HTTP at a fixed arrival rate, or
 * Nostr EVENTs over WebSockets. Each gives the same LoadResult; the Nostr load also keeps what
 * only it can see (fresh events running out, OKs that said duplicate).
 */
import type { RunConfig } from './config.js';
import { runArrivalLoad } from './arrival-load.js';
import { runHttpLoad } from './http-load.js';
import type { LoadResult } from './http-load.js';
import type { FreshEvents } from './fresh-events.js';
import { authorOf } from './fresh-events.js';
import { runNostrLoad } from '../ws-load.js';
import { runNostrReads } from '../ws-read-load.js';
import { READS, workloadOf, workloadSpec } from './config.js';
import { EPOCH } from './event-pool.js';

export interface Load {
  /** Send for `seconds`, reporting the elapsed seconds now and then. */
  run(seconds: number, onTick?: (elapsedSec: number) => void): Promise<LoadResult>;
  /** Over every run so far: pre-signed events ran out (Nostr with fresh events). */
  readonly exhausted: boolean;
  /** Over every run so far: OKs that said duplicate (Nostr). */
  readonly duplicates: number;
  /** Over every run so far: fresh events stored (OK true, not duplicate), by author (Nostr). */
  readonly storedByAuthor: readonly number[];
}

export interface LoadTarget {
  /** The gateway's, the peer's or the relay's http:// URL. */
  url: string;
  /** EVENT frames (Nostr) sent in turn, the pool of request bodies (HTTP). */
  pool: string[];
  /** HTTP: a client's next body from the pool (client-bodies.ts), one turn per run. */
  bodyFor: (client: string) => string;
  /** The fresh events, signed ahead, when the run uses them (read at each run). */
  fresh: () => FreshEvents | undefined;
  /** Headers naming the client of the next request or connection. */
  headersFor: () => Record<string, string>;
}

function roundAll<T extends object>(values: T): T {
  return Object.fromEntries(
    Object.entries(values).map(([k, v]) => [k, Number((v as number).toFixed(3))]),
  ) as T;
}

class NostrLoad implements Load {
  exhausted = false;
  duplicates = 0;
  readonly storedByAuthor: number[];

  constructor(
    private readonly cfg: RunConfig,
    private readonly target: LoadTarget,
  ) {
    this.storedByAuthor = new Array<number>(cfg.freshEvents?.authors ?? 0).fill(0);
  }

  async run(seconds: number, onTick?: (elapsedSec: number) => void): Promise<LoadResult> {
    const fresh = this.target.fresh();
    const r = await runNostrLoad({
      url: this.target.url.replace(/^http/, 'ws'),
      connections: this.cfg.connections,
      durationSec: seconds,
      events: this.target.pool,
      ...(fresh ? { fresh } : {}),
      headersFor: this.target.headersFor,
      onProgress: onTick,
    });
    this.exhausted ||= r.exhausted;
    this.duplicates += r.counts.duplicates;
    const authors = this.storedByAuthor.length;
    for (const i of r.stored) this.storedByAuthor[authorOf(i, authors)]!++;
    const { counts } = r;
    return {
      wallSeconds: r.wallSeconds,
      counts: {
        requests: counts.requests,
        ok2xx: counts.ok,
        limited429: counts.limited,
        otherNon2xx: counts.otherRejected,
        errors: counts.errors + counts.timeouts,
        timeouts: counts.timeouts,
        // Nostr rejections other than rate-limited, in the shape HTTP statuses take.
        otherStatuses: counts.otherRejected ? { 'OK false': counts.otherRejected } : {},
      },
      latencyMs: r.latencyMs && roundAll(r.latencyMs),
    };
  }
}

/** Pages of stored notes asked over and over (nostr-reads): REQs are its requests. */
class NostrReadLoad implements Load {
  readonly exhausted = false;
  readonly duplicates = 0;
  readonly storedByAuthor = [];
  private runs = 0;

  constructor(
    private readonly cfg: RunConfig,
    private readonly target: LoadTarget,
  ) {}

  async run(seconds: number, onTick?: (elapsedSec: number) => void): Promise<LoadResult> {
    const r = await runNostrReads({
      url: this.target.url.replace(/^http/, 'ws'),
      connections: this.cfg.connections,
      durationSec: seconds,
      stored: { count: READS.stored, firstCreatedAt: EPOCH },
      limit: READS.limit,
      // The warm-up and the window ask for different pages.
      seed: this.cfg.seed * 1000 + this.cfg.run * 10 + this.runs++,
      headersFor: this.target.headersFor,
      onProgress: onTick,
    });
    const { counts } = r;
    return {
      wallSeconds: r.wallSeconds,
      counts: {
        requests: counts.requests,
        ok2xx: counts.requests,
        limited429: counts.limited,
        otherNon2xx: counts.closed,
        // A REQ the relay never finished is its own count (timeouts), not a connection error:
        // nostr-rs-relay drops a few (see STALL_MS); failureReasons bounds their share.
        errors: counts.errors,
        timeouts: counts.timeouts,
        otherStatuses: counts.closed ? { CLOSED: counts.closed } : {},
      },
      latencyMs: r.latencyMs && roundAll(r.latencyMs),
      reads: { events: counts.events, short: counts.short },
    };
  }
}

class HttpLoad implements Load {
  readonly exhausted = false;
  readonly duplicates = 0;
  readonly storedByAuthor = [];

  constructor(
    private readonly cfg: RunConfig,
    private readonly target: LoadTarget,
  ) {}

  run(seconds: number, onTick?: (elapsedSec: number) => void): Promise<LoadResult> {
    const { url, bodyFor, headersFor } = this.target;
    const common = { url, connections: this.cfg.connections, durationSec: seconds, bodyFor };
    return this.cfg.rate
      ? runArrivalLoad({ ...common, rate: this.cfg.rate, headersFor, onTick })
      : runHttpLoad({ ...common, headersFor, onTick });
  }
}

/** The load a run's configuration asks for. */
export function loadFor(cfg: RunConfig, target: LoadTarget): Load {
  if (cfg.transport !== 'websocket') return new HttpLoad(cfg, target);
  return workloadSpec(workloadOf(cfg)).reads
    ? new NostrReadLoad(cfg, target)
    : new NostrLoad(cfg, target);
}
