/**
 * A frozen set of pubkeys packed as sorted 32-byte records in one buffer: 32 bytes a key
 * (a Set of 64-character hex strings costs about four times that, docs/NOSTR.md), looked up
 * by binary search (about 20 comparisons for a million keys). Built once, never changed:
 * a refresh builds a new one and swaps it in whole.
 */
const KEY_BYTES = 32;
const HEX_KEY = /^[0-9a-f]{64}$/;

export class PubkeySet {
  private constructor(private readonly packed: Buffer) {}

  static readonly EMPTY = new PubkeySet(Buffer.alloc(0));

  /** The set of `hexKeys` (lowercase hex; anything else is skipped, duplicates kept once). */
  static of(hexKeys: Iterable<string>): PubkeySet {
    return PubkeySet.build(new Set(hexKeys));
  }

  /**
   * The set of `keys` (lowercase hex, distinct: the walk's set; anything else is skipped),
   * packed into an ArrayBuffer of its own, so the thread that built it can transfer it
   * (`transferable`) and another take it without a copy (`fromPacked`): the trust worker
   * builds, the gateway's thread swaps it in. Keys are bucketed by their first two bytes and
   * each bucket sorted (a 65,536th of the set, or one list's keys ground to one prefix, at
   * most maxFollowsPerList): sorting the hex strings sorts the bytes they spell (0-9 sort
   * before a-f, as in ASCII).
   */
  static build(keys: ReadonlySet<string>): PubkeySet {
    const buckets: string[][] = Array.from({ length: 65_536 }, () => []);
    let n = 0;
    for (const hex of keys) {
      if (!HEX_KEY.test(hex)) continue;
      buckets[parseInt(hex.slice(0, 4), 16)]!.push(hex);
      n++;
    }
    const packed = Buffer.from(new ArrayBuffer(n * KEY_BYTES));
    let at = 0;
    for (const bucket of buckets) {
      for (const hex of bucket.sort()) at += packed.write(hex, at, KEY_BYTES, 'hex');
    }
    return new PubkeySet(packed);
  }

  /** The set whose records `build` packed, from its `transferable` buffer (no copy). */
  static fromPacked(records: ArrayBuffer): PubkeySet {
    if (records.byteLength % KEY_BYTES !== 0) throw new Error('not a packed set of 32-byte keys');
    return new PubkeySet(Buffer.from(records));
  }

  /**
   * The buffer holding exactly the records (of a set from `build`), to transfer to another
   * thread: `postMessage(msg, [set.transferable])` detaches it, leaving this set empty.
   */
  get transferable(): ArrayBuffer {
    const { buffer, byteOffset, byteLength } = this.packed;
    if (byteOffset !== 0 || byteLength !== buffer.byteLength || !(buffer instanceof ArrayBuffer))
      throw new Error('a set not built by PubkeySet.build shares its buffer');
    return buffer;
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
