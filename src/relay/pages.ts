/**
 * Memory the OS gets back as soon as we are done with it.
 *
 * A plain Buffer of 1 MiB comes from malloc. glibc raises its mmap threshold each time it
 * frees an mmapped chunk, so after the first slab is freed every later slab of that size
 * lands on the brk heap, which only shrinks from the top: measured under churn, RSS never
 * came back. Freeing also waits for a major GC, which nothing triggers while a relay drains
 * with no traffic. A resizable ArrayBuffer instead reserves its pages through V8's page
 * allocator (mmap), and `resize(0)` decommits them at once (mprotect + madvise), with no GC
 * and no allocator in between. So RSS follows the backlog down, slab by slab.
 */

interface ResizableArrayBuffer extends ArrayBuffer {
  resize(newByteLength: number): void;
}

type ResizableArrayBufferConstructor = new (
  byteLength: number,
  options: { maxByteLength: number },
) => ResizableArrayBuffer;

// The ES2024 constructor signature; the project's lib target (ES2022) does not declare it.
const Resizable = ArrayBuffer as unknown as ResizableArrayBufferConstructor;

/** `bytes` of uninitialised memory that becomes resident page by page as it is written. */
export function allocateReleasable(bytes: number): Buffer {
  return Buffer.from(new Resizable(bytes, { maxByteLength: bytes }));
}

/** Give the pages back to the OS now. The buffer reads as empty afterwards. */
export function release(buffer: Buffer): void {
  (buffer.buffer as ResizableArrayBuffer).resize(0);
}
