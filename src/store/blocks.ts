import { Lru } from '../util/lru.js';
import type { ClientKey } from './keys.js';

interface Block {
  /** The counter's value in the store when it was last seen at or over a limit. */
  consumed: number;
  /** When the counter's window ends (and the store forgets it). */
  endsAt: number;
}

/**
 * Clients known to be over their limit until their window ends, for at most `max` clients of
 * one quota counter (class, tier, window): past that, the least recently refused is forgotten,
 * and its next request asks the store again, which still refuses it. So eviction costs one
 * round trip, never an admission: the store stays the judge. A client that keeps sending
 * stays recent, since every refusal served from here touches it.
 *
 * Shared by every limiter of the counter whatever its points (the multiplier in force): a
 * block records what was consumed, and each limiter compares it to its own limit.
 */
export class InMemoryBlocks {
  private readonly blocks: Lru<ClientKey, Block>;

  constructor(
    readonly max: number,
    private readonly now: () => number = Date.now,
  ) {
    this.blocks = new Lru<ClientKey, Block>({ max });
  }

  /** Milliseconds the key stays refused under a limit of `points`; 0 when not blocked. */
  msBlocked(key: ClientKey, points: number): number {
    const block = this.blocks.get(key);
    if (!block || block.consumed < points) return 0;
    const left = block.endsAt - this.now();
    if (left > 0) return left;
    this.blocks.delete(key);
    return 0;
  }

  /** Remember that the key's counter stood at `consumed` with `msLeft` of its window to go. */
  block(key: ClientKey, consumed: number, msLeft: number): void {
    if (msLeft <= 0) return;
    const now = this.now();
    const current = this.blocks.get(key);
    // Answers may arrive out of order: a live block never goes back to a lower count.
    if (current && current.endsAt > now && current.consumed >= consumed) return;
    this.blocks.set(key, { consumed, endsAt: now + msLeft });
  }

  /** The key's counter went down by `points` (a refund): under its limit again, it is let go. */
  lower(key: ClientKey, points: number): void {
    const block = this.blocks.peek(key);
    if (block) block.consumed -= points;
  }

  /** Clients held now. */
  get size(): number {
    return this.blocks.size;
  }
}
