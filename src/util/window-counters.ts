import { Lru } from './lru.js';

interface Window {
  consumed: number;
  endsAt: number;
}

export interface WindowCount {
  /** Points consumed in the current window, this consume included. */
  consumed: number;
  /** Milliseconds until the window ends and the count starts again. */
  msBeforeNext: number;
}

/**
 * Fixed-window counters in memory for at most `max` keys: past that, the least recently used
 * key is forgotten (its next consume starts a fresh window). A key that keeps consuming stays
 * recent, so what is forgotten is a key that has gone quiet. No timer per key: an ended window
 * is replaced when its key comes back, or evicted in its turn.
 */
export class WindowCounters<K extends string = string> {
  private readonly windows: Lru<K, Window>;

  constructor(
    readonly max: number,
    private readonly now: () => number = Date.now,
  ) {
    this.windows = new Lru<K, Window>({ max });
  }

  /** Add `points` to the key's window (one of `windowMs` from now if none is running). */
  consume(key: K, points: number, windowMs: number): WindowCount {
    const now = this.now();
    const window = this.windows.get(key);
    if (window && window.endsAt > now) {
      window.consumed += points;
      return { consumed: window.consumed, msBeforeNext: window.endsAt - now };
    }
    this.windows.set(key, { consumed: points, endsAt: now + windowMs });
    return { consumed: points, msBeforeNext: windowMs };
  }

  /** Take `points` back from the key's running window (a refund), never below 0. */
  refund(key: K, points: number): void {
    const window = this.windows.peek(key);
    if (window && window.endsAt > this.now())
      window.consumed = Math.max(0, window.consumed - points);
  }

  /** Points consumed in the key's running window (0 when none runs); the key stays as recent as it was. */
  peek(key: K): number {
    const window = this.windows.peek(key);
    return window && window.endsAt > this.now() ? window.consumed : 0;
  }

  /** Keys held now (ended windows included until they are replaced or evicted). */
  get size(): number {
    return this.windows.size;
  }
}
