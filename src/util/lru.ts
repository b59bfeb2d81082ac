import { LRUCache } from 'lru-cache';

/**
 * lru-cache, whose `delete` of the last entry left costs O(1) here instead of O(max).
 *
 * lru-cache 11 answers the delete of its only entry with its whole `clear()`, which refills
 * every array it preallocated for `max` entries: 24-48 us at 10,000 and 3.6-9.2 ms at
 * 1,000,000 on the 2-core test machine (scripts/lru-delete-cost.mjs; the more with a TTL). A
 * set that empties at each write on a quiet gateway (the writes awaiting their relay's answer,
 * a lone blocked client whose block ends) would pay that each time. `pop()` removes the least
 * recently used entry without the refill, and with one entry left that entry is the one to
 * delete. Every cache of the gateway is made here (test/unit/util/lru.test.ts holds the
 * inventory). A `get()` that meets a stale last entry still clears (lru-cache deletes it
 * through its private delete): of the caches read with get() under a TTL, the awaited writes
 * meet one only for a write unanswered for 30 s, and the relay information documents' cache is
 * a few entries long.
 */
export class Lru<K extends NonNullable<unknown>, V extends NonNullable<unknown>> extends LRUCache<
  K,
  V
> {
  private readonly deleting: { key: K | undefined };

  constructor(options: LRUCache.Options<K, V, unknown>) {
    const deleting: { key: K | undefined } = { key: undefined };
    const dispose = options.dispose;
    super(
      dispose
        ? {
            ...options,
            // The pop below is a delete: its dispose says so, as lru-cache's own delete does.
            dispose: (v, k, reason) => dispose(v, k, deleting.key === k ? 'delete' : reason),
          }
        : options,
    );
    this.deleting = deleting;
  }

  override delete(key: K): boolean {
    // peek with allowStale: a stale entry is still held, and its delete would still clear.
    if (this.size === 1 && this.peek(key, { allowStale: true }) !== undefined) {
      this.deleting.key = key;
      try {
        this.pop();
      } finally {
        this.deleting.key = undefined;
      }
      return true;
    }
    return super.delete(key);
  }
}
