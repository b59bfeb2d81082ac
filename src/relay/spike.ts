import { setImmediate as yieldToLoop } from 'node:timers/promises';
import { allocateReleasable, release } from './pages.js';

/** Pages are touched in steps this big, yielding in between so the relay keeps serving. */
const TOUCH_STEP = 16 * 1024 * 1024;
export const MAX_SPIKE_BYTES = 64 * 1024 * 1024 * 1024;

export class SpikeError extends Error {
  override name = 'SpikeError';
}

interface Spike {
  buffer: Buffer;
  touched: number;
  timer?: NodeJS.Timeout;
}

/**
 * Sudden memory growth unrelated to traffic, like an embedded store that balloons: a block
 * of memory made resident at once, held for a while, then handed back to the OS.
 */
export class SpikeManager {
  private readonly active = new Set<Spike>();
  private periodic: NodeJS.Timeout | undefined;
  private stopped = false;
  /** Spikes started since launch. */
  count = 0;

  /** Bytes currently held (and resident) by spikes. */
  get heldBytes(): number {
    let total = 0;
    for (const spike of this.active) total += spike.touched;
    return total;
  }

  /**
   * Allocate `bytes`, touch every page, and release them `holdMs` later. Resolves once the
   * memory is resident.
   */
  async trigger(bytes: number, holdMs: number): Promise<void> {
    if (!Number.isSafeInteger(bytes) || bytes <= 0 || bytes > MAX_SPIKE_BYTES) {
      throw new SpikeError(`spike size must be 1 to ${MAX_SPIKE_BYTES} bytes`);
    }
    if (this.stopped) throw new SpikeError('relay is shutting down');
    let buffer: Buffer;
    try {
      buffer = allocateReleasable(bytes);
    } catch (err) {
      throw new SpikeError(`could not allocate ${bytes} bytes: ${(err as Error).message}`);
    }
    const spike: Spike = { buffer, touched: 0 };
    this.active.add(spike);
    this.count++;
    while (spike.touched < bytes && this.active.has(spike)) {
      const end = Math.min(bytes, spike.touched + TOUCH_STEP);
      buffer.fill(0xa5, spike.touched, end);
      spike.touched = end;
      if (end < bytes) await yieldToLoop();
    }
    if (!this.active.has(spike)) return;
    spike.timer = setTimeout(() => this.drop(spike), holdMs);
    spike.timer.unref();
  }

  /** Start a spike of `bytes` every `everyMs`, each held for `holdMs`. */
  startPeriodic(bytes: number, everyMs: number, holdMs: number, onError: (err: unknown) => void) {
    this.periodic = setInterval(() => {
      this.trigger(bytes, holdMs).catch(onError);
    }, everyMs);
    this.periodic.unref();
  }

  /** Release everything held and start no more spikes. */
  stop(): void {
    this.stopped = true;
    clearInterval(this.periodic);
    for (const spike of this.active) this.drop(spike);
  }

  private drop(spike: Spike): void {
    clearTimeout(spike.timer);
    if (this.active.delete(spike)) release(spike.buffer);
  }
}
