import type { DataFile } from './datafile.js';
import type { Memtable } from './memtable.js';

export const FLUSH_TICK_MS = 50;
/** Upper bound for one gathered write (keeps the iovec count well under IOV_MAX). */
const MAX_WRITE_BYTES = 64 * 1024 * 1024;
/** Measured drain rate is averaged over about this long. */
const RATE_WINDOW_MS = 1000;

/**
 * Drains the memtable into the data file at a set rate, on a timer and never per request,
 * so the backlog (and the memory holding it) grows whenever writes outpace the drain.
 * Each tick earns rate x elapsed bytes; fractions carry over, and a late tick is credited
 * up to one second, so the long-run rate is the configured one.
 */
export class Flusher {
  private timer: NodeJS.Timeout | undefined;
  private allowance = 0;
  private last = performance.now();
  private writing: Promise<void> | undefined;
  private flushed = 0;
  private samples: { t: number; bytes: number }[] = [];
  errors = 0;
  lastError: string | undefined;

  constructor(
    private readonly memtable: Memtable,
    private readonly file: DataFile,
    private rate: number,
    private readonly onError: (err: unknown) => void = () => {},
  ) {}

  /** Bytes written to the file by this process. */
  get flushedBytes(): number {
    return this.flushed;
  }

  get rateBytesPerSec(): number {
    return this.rate;
  }

  /** Change the drain rate at run time (0 pauses draining). */
  set rateBytesPerSec(rate: number) {
    this.rate = rate;
    this.allowance = Math.min(this.allowance, rate);
  }

  /** Bytes per second actually written over the last second or so. */
  drainedBytesPerSec(now = performance.now()): number {
    const base = this.samples[0];
    if (!base || now - base.t < 1) return 0;
    return ((this.flushed - base.bytes) * 1000) / (now - base.t);
  }

  start(): void {
    this.last = performance.now();
    this.timer = setInterval(() => this.tick(), FLUSH_TICK_MS);
    this.timer.unref();
  }

  /** Stop the timer and wait for a write in flight. */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.writing;
  }

  /** Write whatever is left at full speed (at shutdown, after stop()). */
  async flushAll(): Promise<void> {
    await this.writing;
    while (this.memtable.backlogBytes > 0) {
      const before = this.errors;
      await this.write(Math.min(this.memtable.backlogBytes, MAX_WRITE_BYTES));
      if (this.errors > before) return;
    }
  }

  private tick(): void {
    const now = performance.now();
    const elapsed = (now - this.last) / 1000;
    this.last = now;
    this.sample(now);
    const backlog = this.memtable.backlogBytes;
    if (backlog === 0) {
      this.allowance = 0;
      return;
    }
    this.allowance = Math.min(this.allowance + this.rate * elapsed, this.rate);
    if (this.writing) return;
    const n = Math.min(Math.floor(this.allowance), backlog, MAX_WRITE_BYTES);
    if (n <= 0) return;
    this.allowance -= n;
    this.writing = this.write(n).finally(() => {
      this.writing = undefined;
    });
  }

  private async write(n: number): Promise<void> {
    try {
      const written = await this.file.append(this.memtable.peek(n));
      this.memtable.advance(written);
      this.flushed += written;
    } catch (err) {
      this.errors++;
      this.lastError = err instanceof Error ? err.message : String(err);
      this.onError(err);
    }
  }

  private sample(now: number): void {
    this.samples.push({ t: now, bytes: this.flushed });
    // Keep the newest sample that is at least a window old as the base.
    while (this.samples.length > 2 && now - this.samples[1]!.t >= RATE_WINDOW_MS) {
      this.samples.shift();
    }
  }
}
