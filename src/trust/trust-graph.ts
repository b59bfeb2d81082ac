/**
 * nostr.trust: the pubkeys within `hops` follow hops of the seeds, read from a relay and
 * refreshed every `refreshSec`. The set in force is replaced whole when a refresh completes;
 * until then (and when one fails or times out) the previous one serves, so a write never
 * waits for a refresh. One reader per gateway process; refreshes never overlap. Each walk runs
 * in a worker thread of its own (trust-worker.ts), so the gateway's thread only swaps a set in.
 */
import { Worker } from 'node:worker_threads';
import type { ResourceLimits } from 'node:worker_threads';
import type { WalkBounds, WalkResult } from './follow-graph.js';
import { PubkeySet } from './pubkey-set.js';
import { PARSE_ROOM } from './relay-follow-source.js';

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
  /** Called with each set swapped in. */
  swapped: (set: PubkeySet) => void;
  report?: (r: RefreshReport) => void;
  /** The walk's worker's limits (default: `workerLimits(settings)`; tests lower them). */
  resourceLimits?: ResourceLimits;
  /** How long past its deadline a walk's worker may run (default: WALK_OVERRUN_MS). */
  overrunMs?: number;
  /** The worker's script (default: trust-worker.js; tests give one that never ends). */
  workerUrl?: URL;
}

/**
 * A walk's worker may run this long past the walk's deadline (building the set and handing
 * it over: 1-2 s at a million keys) before it is ended and the refresh fails: a worker that
 * never answers (stuck in its work) would otherwise hold a core, and every later refresh.
 */
export const WALK_OVERRUN_MS = 30_000;

/** What a walk's worker is given (trust-worker.ts). */
export interface WalkTask {
  settings: TrustSettings;
  url: string;
  /** When every REQ of the walk gives up (ms since the epoch). */
  deadline: number;
}

/** A walk's figures and its set's records, transferred (or why it failed). */
export type WalkDone =
  | ({ ok: true; records: ArrayBuffer; oversized: number; requests: number } & Omit<
      WalkResult,
      'pubkeys'
    >)
  | { ok: false; error: string };

const WORKER = new URL('./trust-worker.js', import.meta.url);
const MB = 1024 * 1024;

/**
 * The walk's heap bound: what it may hold at once, with room to spare. Its set as hex strings
 * (about 100 bytes a key measured; 200 counted for the frontier and the Set's growth) up to
 * maxPubkeys; one REQ's answer (authorsPerReq events of up to maxEventBytes, 3 bytes a byte:
 * a follow list parses into about 2); twice the room a frame's parse is asked
 * (relay-follow-source.ts: V8 collects garbage by halfway from the live heap to the limit, so
 * an honest walk always has that room); and 64 MB for the modules. For the defaults (10^6
 * keys, 100 authors a REQ, 1 MB frames) 619 MB, a bound rather than a reservation: the 1M-key
 * walk uses a few hundred (docs/BENCHMARKS.md). The set's records (32 bytes a key) are an
 * ArrayBuffer, outside it. A walk past it is ended (ERR_WORKER_OUT_OF_MEMORY, or a frame
 * refused for want of room): a failed refresh, the gateway's own heap untouched.
 */
export function workerLimits(s: TrustSettings): ResourceLimits {
  const answer = s.authorsPerReq * s.maxEventBytes * 3 + 2 * PARSE_ROOM * s.maxEventBytes;
  return { maxOldGenerationSizeMb: 64 + Math.ceil((s.maxPubkeys * 200 + answer) / MB) };
}

/** The longest wait after a failed refresh. */
export const RETRY_SEC = 30;

export class TrustGraph {
  private current: PubkeySet = PubkeySet.EMPTY;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<RefreshReport> | undefined;
  private stopped = false;
  private worker: Worker | undefined;

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
    void this.worker?.terminate();
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
    const began = Date.now();
    let report: RefreshReport;
    try {
      const { records, ...walk } = await this.walk();
      const set = PubkeySet.fromPacked(records);
      if (!this.stopped) {
        this.current = set;
        this.deps.swapped(set);
      }
      report = { ...walk, pubkeys: set.size, bytes: set.bytes, ms: Date.now() - began };
    } catch (err) {
      report = {
        ok: false,
        pubkeys: this.current.size,
        bytes: this.current.bytes,
        ms: Date.now() - began,
        error: (err as Error).message,
      };
    }
    this.deps.report?.(report);
    return report;
  }

  /**
   * One walk in a worker of its own (trust-worker.ts): the REQs, parsing, signature checks
   * and the set's building run there, and the set's records come back transferred, so this
   * thread only swaps a reference. Whatever ends the worker first (its error, an uncaught
   * throw, running out of its heap, an exit, stop(), running WALK_OVERRUN_MS past its
   * deadline) fails the refresh; it ends after.
   */
  private walk(): Promise<Extract<WalkDone, { ok: true }>> {
    if (this.stopped) return Promise.reject(new Error('the walk was stopped'));
    const task: WalkTask = {
      settings: this.settings,
      url: this.deps.url,
      deadline: Date.now() + this.settings.timeoutSec * 1000,
    };
    const worker = new Worker(this.deps.workerUrl ?? WORKER, {
      workerData: task,
      // Not the gateway's flags: some a worker refuses (--input-type), failing every walk.
      execArgv: [],
      resourceLimits: this.deps.resourceLimits ?? workerLimits(this.settings),
    });
    this.worker = worker;
    let overrun: NodeJS.Timeout | undefined;
    return new Promise<Extract<WalkDone, { ok: true }>>((resolve, reject) => {
      const graceMs = this.deps.overrunMs ?? WALK_OVERRUN_MS;
      overrun = setTimeout(
        () => reject(new Error(`the walk's worker ran ${graceMs} ms past its deadline: ended`)),
        task.deadline - Date.now() + graceMs,
      );
      overrun.unref();
      worker.once('message', (done: WalkDone) => {
        if (done.ok) resolve(done);
        else reject(new Error(done.error));
      });
      worker.on('error', reject);
      worker.once('exit', (code) =>
        reject(
          new Error(
            this.stopped ? 'the walk was stopped' : `the walk's worker exited (code ${code})`,
          ),
        ),
      );
    }).finally(() => {
      clearTimeout(overrun);
      this.worker = undefined;
      void worker.terminate();
    });
  }
}
