/**
 * A frozen set of pubkeys packed as sorted 32-byte records in one buffer: 32 bytes a key
 * (a Set of 64-character hex strings costs about four times that, docs/NOSTR.md), looked up
 * by binary search (about 20 comparisons for a million keys). Built once, never changed:
 * a refresh builds a new one and swaps it in whole.
 */
const KEY_BYTES = 32;
const HEX_KEY = /^[0-9a-f]{64}$/;

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

export class PubkeySet {
  private constructor(private readonly packed: Buffer) {}

  static readonly EMPTY = new PubkeySet(Buffer.alloc(0));

  /** The set of `hexKeys` (lowercase hex; anything else is skipped, duplicates kept once). */
  static of(hexKeys: Iterable<string>): PubkeySet {
    const unique = new Set<string>();
    for (const hex of hexKeys) if (HEX_KEY.test(hex)) unique.add(hex);
    // Sorting the hex strings sorts the bytes they spell (0-9 sort before a-f, as in ASCII).
    const sorted = [...unique].sort();
    const packed = Buffer.allocUnsafe(sorted.length * KEY_BYTES);
    sorted.forEach((hex, i) => packed.write(hex, i * KEY_BYTES, KEY_BYTES, 'hex'));
    return new PubkeySet(packed);
  }

  /**
   * The set of `keys` (lowercase hex, distinct: the walk's set), built in slices with a turn
   * of the event loop between them, so building a million keys never holds a write for more
   * than a slice: keys are bucketed by their first two bytes, each bucket sorted (small: a
   * 65,536th of the set, or one list's keys ground to one prefix, at most maxFollowsPerList).
   */
  static async build(keys: ReadonlySet<string>, slice = 20_000): Promise<PubkeySet> {
    const buckets: string[][] = Array.from({ length: 65_536 }, () => []);
    let n = 0;
    for (const hex of keys) {
      if (!HEX_KEY.test(hex)) continue;
      buckets[parseInt(hex.slice(0, 4), 16)]!.push(hex);
      if (++n % slice === 0) await nextTurn();
    }
    const packed = Buffer.allocUnsafe(n * KEY_BYTES);
    let at = 0;
    for (const bucket of buckets) {
      bucket.sort();
      for (const hex of bucket) at += packed.write(hex, at, KEY_BYTES, 'hex');
      if (at % (slice * KEY_BYTES) < bucket.length * KEY_BYTES) await nextTurn();
    }
    return new PubkeySet(packed);
  }

  get size(): number {
    return this.packed.length / KEY_BYTES;
  }

  /** Bytes the keys occupy. */
  get bytes(): number {
    return this.packed.length;
  }

  has(hex: string): boolean {
    if (this.packed.length === 0 || !HEX_KEY.test(hex)) return false;
    const key = Buffer.from(hex, 'hex');
    let lo = 0;
    let hi = this.size - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >>> 1;
      const at = mid * KEY_BYTES;
      const order = this.packed.compare(key, 0, KEY_BYTES, at, at + KEY_BYTES);
      if (order === 0) return true;
      // compare() orders the set's record against the key: below it, look above.
      if (order < 0) lo = mid + 1;
      else hi = mid - 1;
    }
    return false;
  }
}
