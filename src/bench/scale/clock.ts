/**
 * A virtual clock for the scale simulation: real async code (the decider, the lease book)
 * runs against it deterministically. Events are kept in time order; every event of one tick
 * runs, then the microtasks they started drain completely (one setImmediate: Node empties
 * the microtask and nextTick queues before any macrotask) before the clock moves on, so a
 * continuation always reads the clock of the tick its promise was resolved in.
 */
import { EventHeap } from './heap.js';

interface Event {
  t: number;
  seq: number;
  run: () => void;
}

/** A timer handle for code that calls setInterval (the lease book's idle sweep). */
export interface VirtualTimer {
  cancelled: boolean;
  unref(): VirtualTimer;
  ref(): VirtualTimer;
  hasRef(): boolean;
}

const drain = () => new Promise<void>((resolve) => setImmediate(resolve));

export class VirtualClock {
  private readonly events = new EventHeap<Event>();
  private seq = 0;
  private t: number;
  /** Events run so far (for the report: how much work the simulation did). */
  ran = 0;

  /**
   * `tickMs`: event times are rounded up to it, and events of one tick run together before
   * the microtasks drain (the simulation's time resolution).
   */
  constructor(
    readonly startMs: number,
    readonly tickMs: number,
  ) {
    this.t = startMs;
  }

  readonly now = (): number => this.t;

  /** Run `fn` at virtual time `t` (rounded up to the tick; never before now). */
  at(t: number, fn: () => void): void {
    const tick = this.tickMs;
    const at = Math.max(this.t, Math.ceil((t - this.startMs) / tick - 1e-6) * tick + this.startMs);
    this.events.push({ t: at, seq: this.seq++, run: fn });
  }

  /** Run `fn` every `ms` from now until cancelled (as setInterval does, on virtual time). */
  every(ms: number, fn: () => void): VirtualTimer {
    const timer: VirtualTimer = {
      cancelled: false,
      unref: () => timer,
      ref: () => timer,
      hasRef: () => false,
    };
    const fire = () => {
      if (timer.cancelled) return;
      fn();
      this.at(this.t + ms, fire);
    };
    this.at(this.t + ms, fire);
    return timer;
  }

  /**
   * Call `make` with setInterval served by this clock (the lease book starts its sweep in its
   * constructor): the real global is restored before this returns.
   */
  withTimers<T>(make: () => T): T {
    const real = globalThis.setInterval;
    globalThis.setInterval = ((fn: () => void, ms?: number) =>
      this.every(ms ?? 1, fn)) as unknown as typeof setInterval;
    try {
      return make();
    } finally {
      globalThis.setInterval = real;
    }
  }

  /** Run every event up to `untilMs`, draining microtasks after each tick; then set the clock to it. */
  async runUntil(untilMs: number): Promise<void> {
    for (;;) {
      const next = this.events.peek();
      if (!next || next.t > untilMs) break;
      this.t = next.t;
      while (this.events.size > 0 && this.events.peek()!.t === this.t) {
        this.events.pop()!.run();
        this.ran++;
      }
      await drain();
    }
    this.t = Math.max(this.t, untilMs);
    await drain();
  }
}
