import { allocateReleasable, release } from './pages.js';

export const SLAB_BYTES = 1024 * 1024;

/**
 * Accepted event bytes that are not on disk yet, as a FIFO of fixed-size slabs.
 *
 * Positions are byte offsets in the data file's address space: an event appended at `pos`
 * will sit at file offset `pos` once flushed, so the index needs one number per event and
 * a byte is in memory exactly when `pos >= headPos`. Writers append into the tail slab; the
 * flusher drains from the head and a slab is released to the OS once it is fully drained.
 */
export class Memtable {
  private readonly slabs: Buffer[] = [];
  /** Position of the first byte of slabs[0]. */
  private firstSlabPos: number;
  private head: number;
  private tail: number;

  constructor(
    startPos: number,
    readonly slabBytes = SLAB_BYTES,
  ) {
    this.firstSlabPos = startPos;
    this.head = startPos;
    this.tail = startPos;
  }

  /** The first byte not yet on disk (the file's end once flushes complete). */
  get headPos(): number {
    return this.head;
  }

  /** Where the next append goes. */
  get tailPos(): number {
    return this.tail;
  }

  /** Bytes accepted but not yet flushed. */
  get backlogBytes(): number {
    return this.tail - this.head;
  }

  /** Bytes written into slabs still held (the backlog plus the drained start of the head slab). */
  get heldBytes(): number {
    return this.slabs.length === 0 ? 0 : this.tail - this.firstSlabPos;
  }

  get slabCount(): number {
    return this.slabs.length;
  }

  /** Append bytes (a string is UTF-8 encoded); returns the position of the first byte. */
  append(data: string | Buffer): number {
    const pos = this.tail;
    if (typeof data === 'string') {
      const length = Buffer.byteLength(data);
      const room = this.roomInTail();
      if (length <= room && length > 0) {
        // Common case: encode straight into the slab, no intermediate buffer.
        const slab = this.slabs[this.slabs.length - 1]!;
        slab.write(data, this.slabBytes - room, length, 'utf8');
        this.tail += length;
        return pos;
      }
      data = Buffer.from(data, 'utf8');
    }
    let offset = 0;
    while (offset < data.length) {
      if (this.roomInTail() === 0) this.addSlab();
      const slab = this.slabs[this.slabs.length - 1]!;
      const at = this.slabBytes - this.roomInTail();
      const n = data.copy(slab, at, offset);
      offset += n;
      this.tail += n;
    }
    return pos;
  }

  /** Copy `length` bytes starting at `pos` (which must not be flushed yet) into `target`. */
  copyOut(pos: number, length: number, target: Buffer, targetOffset = 0): void {
    if (pos < this.head || pos + length > this.tail) {
      throw new RangeError(`bytes ${pos}+${length} are not in the memtable`);
    }
    let done = 0;
    while (done < length) {
      const at = pos + done - this.firstSlabPos;
      const slab = this.slabs[Math.floor(at / this.slabBytes)]!;
      const from = at % this.slabBytes;
      const n = Math.min(length - done, this.slabBytes - from);
      slab.copy(target, targetOffset + done, from, from + n);
      done += n;
    }
  }

  /** Views of the next `length` unflushed bytes, for a gathered write. Valid until advance(). */
  peek(length: number): Buffer[] {
    const views: Buffer[] = [];
    const end = this.head + Math.min(length, this.backlogBytes);
    let pos = this.head;
    while (pos < end) {
      const at = pos - this.firstSlabPos;
      const slab = this.slabs[Math.floor(at / this.slabBytes)]!;
      const from = at % this.slabBytes;
      const n = Math.min(end - pos, this.slabBytes - from);
      views.push(slab.subarray(from, from + n));
      pos += n;
    }
    return views;
  }

  /** Mark `length` bytes as on disk and give fully drained slabs back to the OS. */
  advance(length: number): void {
    if (length < 0 || length > this.backlogBytes) {
      throw new RangeError(`cannot advance ${length} bytes with ${this.backlogBytes} in backlog`);
    }
    this.head += length;
    while (this.slabs.length > 0 && this.firstSlabPos + this.slabBytes <= this.head) {
      release(this.slabs.shift()!);
      this.firstSlabPos += this.slabBytes;
    }
  }

  /** Release every slab (at shutdown, once the backlog is on disk or abandoned). */
  releaseAll(): void {
    for (const slab of this.slabs.splice(0)) release(slab);
    this.firstSlabPos = this.tail;
    this.head = this.tail;
  }

  private roomInTail(): number {
    if (this.slabs.length === 0) return 0;
    return this.firstSlabPos + this.slabs.length * this.slabBytes - this.tail;
  }

  private addSlab(): void {
    if (this.slabs.length === 0) this.firstSlabPos = this.tail;
    this.slabs.push(allocateReleasable(this.slabBytes));
  }
}
