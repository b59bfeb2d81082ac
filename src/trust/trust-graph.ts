/**
 * nostr.trust: the pubkeys within `hops` follow hops of the seeds, read from a relay and
 * refreshed every `refreshSec`. The set in force is replaced whole when a refresh completes;
 * until then (and when one fails or times out) the previous one serves, so a write never
 * waits for a refresh. One reader per gateway process; refreshes never overlap.
 */
import type { Event } from 'nostr-tools/pure';
import type { FetchFollowLists, WalkBounds, WalkResult } from './follow-graph.js';
import { walkFollowGraph } from './follow-graph.js';
import { PubkeySet } from './pubkey-set.js';
import { RelayFollowSource } from './relay-follow-source.js';

export interface TrustSettings extends WalkBounds {
  tier: string;
  /** Lowercase hex. */
  seeds: string[];
  refreshSec: number;
  timeoutSec: number;
  authorsPerReq: number;
  maxEventBytes: number;
  verifySignatures: boolean;
}

export interface RefreshReport {
  ok: boolean;
  pubkeys: number;
  bytes: number;
  ms: number;
  lists?: number;
  edges?: number;
  ignored?: number;
  oversized?: number;
  requests?: number;
  truncated?: boolean;
  perHop?: number[];
  error?: string;
}

export interface TrustGraphDeps {
  /** The relay's WebSocket URL. */
  url: string;
  /** Checks a follow list's signature (when verifySignatures). */
  verify: (event: Event) => boolean;
  /** Called with each set swapped in. */
  swapped: (set: PubkeySet) => void;
  report?: (r: RefreshReport) => void;
  now?: () => number;
}

/** The reader of one walk against a relay, ending at the refresh's deadline. */
export function trustSource(
  settings: TrustSettings,
  deps: Pick<TrustGraphDeps, 'url' | 'now'>,
): RelayFollowSource {
  const now = deps.now ?? Date.now;
  return new RelayFollowSource({
    url: deps.url,
    maxEventBytes: settings.maxEventBytes,
    limit: settings.authorsPerReq,
    deadline: now() + settings.timeoutSec * 1000,
    now,
  });
}

/** One walk through `source`: the set, or an error (the relay, the deadline). */
export async function readTrustSet(
  settings: TrustSettings,
  source: RelayFollowSource,
  verify: (event: Event) => boolean,
): Promise<{ set: PubkeySet; walk: WalkResult }> {
  try {
    const fetch: FetchFollowLists = (authors) => source.fetch(authors);
    const accept = settings.verifySignatures ? verify : () => true;
    const batch = settings.authorsPerReq;
    const walk = await walkFollowGraph(settings.seeds, settings, fetch, batch, accept);
    return { set: await PubkeySet.build(walk.pubkeys), walk };
  } finally {
    source.close();
  }
}

/** The longest wait after a failed refresh. */
export const RETRY_SEC = 30;

export class TrustGraph {
  private current: PubkeySet = PubkeySet.EMPTY;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<RefreshReport> | undefined;
  private stopped = false;
  private source: RelayFollowSource | undefined;

  constructor(
    private readonly settings: TrustSettings,
    private readonly deps: TrustGraphDeps,
  ) {}

  /** The set in force (empty until the first refresh completes). */
  get set(): PubkeySet {
    return this.current;
  }

  /**
   * Refresh now, then every refreshSec (each starting refreshSec after the last ended); after a
   * failed one, in at most RETRY_SEC (a relay not up yet when the gateway starts).
   */
  start(): void {
    this.stopped = false;
    void this.refresh().then((r) => this.schedule(r));
  }

  stop(): void {
    this.stopped = true;
    this.source?.close(true);
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** One refresh; a second call while one runs joins it. */
  refresh(): Promise<RefreshReport> {
    this.running ??= this.readOnce().finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  private schedule(last: RefreshReport): void {
    if (this.stopped) return;
    const sec = last.ok ? this.settings.refreshSec : Math.min(this.settings.refreshSec, RETRY_SEC);
    this.timer = setTimeout(() => {
      void this.refresh().then((r) => this.schedule(r));
    }, sec * 1000);
    this.timer.unref();
  }

  private async readOnce(): Promise<RefreshReport> {
    const now = this.deps.now ?? Date.now;
    const began = now();
    let report: RefreshReport;
    try {
      const source = trustSource(this.settings, this.deps);
      this.source = source;
      const { set, walk } = await readTrustSet(this.settings, source, this.deps.verify);
      if (!this.stopped) {
        this.current = set;
        this.deps.swapped(set);
      }
      report = {
        ok: true,
        pubkeys: set.size,
        bytes: set.bytes,
        ms: now() - began,
        lists: walk.lists,
        edges: walk.edges,
        ignored: walk.ignored,
        oversized: source.oversized,
        requests: source.requests,
        truncated: walk.truncated,
        perHop: walk.perHop,
      };
    } catch (err) {
      report = {
        ok: false,
        pubkeys: this.current.size,
        bytes: this.current.bytes,
        ms: now() - began,
        error: (err as Error).message,
      };
    }
    this.source = undefined;
    this.deps.report?.(report);
    return report;
  }
}
