/**
 * Signature verification on worker threads, as a gateway running as one process could do it:
 * `verify(event)` queues the event, the queue is sent at the end of the current tick in
 * batches (structured clone) to the least-busy worker, and the promise settles with the
 * worker's verdict. For `sluice bench verify`; the gateway verifies inline.
 */
import { Worker } from 'node:worker_threads';
import type { Event } from 'nostr-tools/pure';
import type { VerifyBatch, VerifyVerdicts } from './verify-worker.js';

export interface VerifyPoolOptions {
  threads: number;
  /** Events per message at most. */
  maxBatch: number;
}

interface Waiter {
  resolve(valid: boolean): void;
  reject(err: Error): void;
}

interface Pending {
  worker: number;
  waiters: Waiter[];
}

export class VerifyPool {
  private readonly workers: Worker[] = [];
  /** Events sent and not answered, per worker: where the next batch goes. */
  private readonly busy: number[] = [];
  private readonly pending = new Map<number, Pending>();
  private queue: (Waiter & { event: Event })[] = [];
  private flushScheduled = false;
  private seq = 0;
  private failure: Error | undefined;

  private constructor(private readonly options: VerifyPoolOptions) {}

  /** Start the threads; resolves once each has its verifier ready. */
  static async start(options: VerifyPoolOptions): Promise<VerifyPool> {
    const pool = new VerifyPool(options);
    const url = new URL('./verify-worker.js', import.meta.url);
    await Promise.all(
      Array.from({ length: options.threads }, (_, index) => pool.spawn(url, index)),
    );
    return pool;
  }

  private spawn(url: URL, index: number): Promise<void> {
    const worker = new Worker(url);
    this.workers[index] = worker;
    this.busy[index] = 0;
    return new Promise((resolve, reject) => {
      worker.once('error', reject);
      worker.on('message', (message: VerifyVerdicts | 'ready') => {
        if (message === 'ready') return resolve();
        this.settle(message);
      });
      worker.on('error', (err) => {
        // A dead worker fails what it held and every later call: no verdict is made up.
        this.failure = err;
        for (const [seq, pending] of this.pending) {
          if (pending.worker !== index) continue;
          this.pending.delete(seq);
          for (const waiter of pending.waiters) waiter.reject(err);
        }
      });
    });
  }

  verify(event: Event): Promise<boolean> {
    if (this.failure) return Promise.reject(this.failure);
    return new Promise((resolve, reject) => {
      this.queue.push({ event, resolve, reject });
      if (!this.flushScheduled) {
        this.flushScheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  private flush(): void {
    this.flushScheduled = false;
    const queue = this.queue;
    this.queue = [];
    for (let start = 0; start < queue.length; start += this.options.maxBatch) {
      const slice = queue.slice(start, start + this.options.maxBatch);
      const worker = this.leastBusy();
      const seq = this.seq++;
      this.busy[worker]! += slice.length;
      this.pending.set(seq, { worker, waiters: slice });
      this.workers[worker]!.postMessage({
        seq,
        events: slice.map((q) => q.event),
      } satisfies VerifyBatch);
    }
  }

  private leastBusy(): number {
    let best = 0;
    for (let i = 1; i < this.busy.length; i++) if (this.busy[i]! < this.busy[best]!) best = i;
    return best;
  }

  private settle({ seq, verdicts }: VerifyVerdicts): void {
    const pending = this.pending.get(seq);
    if (!pending) return;
    this.pending.delete(seq);
    this.busy[pending.worker]! -= pending.waiters.length;
    pending.waiters.forEach((waiter, i) => waiter.resolve(verdicts[i] === 1));
  }

  async close(): Promise<void> {
    await Promise.all(this.workers.map((w) => w.terminate()));
  }
}
