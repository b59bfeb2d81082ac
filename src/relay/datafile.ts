import { mkdirSync } from 'node:fs';
import { open } from 'node:fs/promises';
import type { FileHandle } from 'node:fs/promises';
import path from 'node:path';

export const DATA_FILE_NAME = 'events.jsonl';

/** What the index keeps about a stored event; `pos`/`len` locate its JSON (without newline). */
export interface RecordMeta {
  id: string;
  pubkey: string;
  createdAt: number;
  kind: number;
  pos: number;
  len: number;
}

/**
 * Records are canonical JSON with a fixed key order (see canonicalJson), so the fields the
 * index needs sit at the start of each line and a restart never parses whole events.
 */
const RECORD_HEAD =
  /^\{"id":"([0-9a-f]{64})","pubkey":"([0-9a-f]{64})","created_at":(\d+),"kind":(\d+),/;
const HEAD_BYTES = 256;
const NEWLINE = 0x0a;

export interface ScanResult {
  records: number;
  /** Lines that were not a record we wrote; kept in the file but not indexed. */
  skipped: number;
}

/** The append-only file of events, one JSON record per line. */
export class DataFile {
  private constructor(
    readonly path: string,
    private readonly handle: FileHandle,
    private end: number,
    /** Bytes of an incomplete last record removed at open. */
    readonly truncatedBytes: number,
  ) {}

  /**
   * Open (creating the directory) for appending; `fresh` starts from an empty file. An
   * incomplete last record (a flush cut short by a crash) is cut off, so appends start on a
   * record boundary and `size` is final once this returns.
   */
  static async open(dir: string, fresh = false): Promise<DataFile> {
    mkdirSync(dir, { recursive: true });
    const file = path.join(dir, DATA_FILE_NAME);
    // O_APPEND: every write lands at the end, whatever happened before.
    const handle = await open(file, 'a+');
    try {
      if (fresh) await handle.truncate(0);
      const { size } = await handle.stat();
      const end = await lastRecordEnd(handle, size);
      if (end < size) await handle.truncate(end);
      return new DataFile(file, handle, end, size - end);
    } catch (err) {
      await handle.close();
      throw err;
    }
  }

  /** Bytes in the file: every flushed byte. */
  get size(): number {
    return this.end;
  }

  /** Read the records already in the file (from an earlier run), handing each to `onRecord`. */
  async scan(onRecord: (meta: RecordMeta) => void): Promise<ScanResult> {
    const result: ScanResult = { records: 0, skipped: 0 };
    const chunk = Buffer.allocUnsafe(1024 * 1024);
    let lineStart = 0;
    let head = Buffer.alloc(0);
    for (let filePos = 0; filePos < this.end;) {
      const want = Math.min(chunk.length, this.end - filePos);
      const { bytesRead } = await this.handle.read(chunk, 0, want, filePos);
      if (bytesRead === 0) break;
      let from = 0;
      while (from < bytesRead) {
        const nl = chunk.indexOf(NEWLINE, from);
        const stop = nl === -1 || nl >= bytesRead ? bytesRead : nl;
        if (head.length < HEAD_BYTES) {
          const take = chunk.subarray(from, Math.min(stop, from + HEAD_BYTES - head.length));
          head = Buffer.concat([head, take]);
        }
        if (stop === bytesRead) break;
        const len = filePos + stop - lineStart;
        const meta = parseRecordHead(head.toString('latin1'), lineStart, len);
        if (meta) {
          onRecord(meta);
          result.records++;
        } else if (len > 0) {
          result.skipped++;
        }
        lineStart = filePos + stop + 1;
        head = Buffer.alloc(0);
        from = stop + 1;
      }
      filePos += bytesRead;
    }
    return result;
  }

  /** Append the buffers in order; returns how many bytes reached the file. */
  async append(buffers: Buffer[]): Promise<number> {
    try {
      const { bytesWritten } = await this.handle.writev(buffers);
      this.end += bytesWritten;
      return bytesWritten;
    } catch (err) {
      // A failed write may have left part of its bytes behind (a full disk): cut them off so
      // file offsets keep matching memtable positions.
      await this.handle.truncate(this.end).catch(() => {});
      throw err;
    }
  }

  /** Read `length` flushed bytes at `pos` into `target`. */
  async readInto(pos: number, length: number, target: Buffer, targetOffset = 0): Promise<void> {
    let done = 0;
    while (done < length) {
      const { bytesRead } = await this.handle.read(
        target,
        targetOffset + done,
        length - done,
        pos + done,
      );
      if (bytesRead === 0) throw new Error(`${this.path}: short read at ${pos + done}`);
      done += bytesRead;
    }
  }

  async close(): Promise<void> {
    await this.handle.close();
  }
}

function parseRecordHead(head: string, pos: number, len: number): RecordMeta | undefined {
  const m = RECORD_HEAD.exec(head);
  if (!m) return undefined;
  return { id: m[1]!, pubkey: m[2]!, createdAt: Number(m[3]), kind: Number(m[4]), pos, len };
}

/** The offset just after the last newline (0 if none): where complete records end. */
async function lastRecordEnd(handle: FileHandle, size: number): Promise<number> {
  const chunk = Buffer.allocUnsafe(64 * 1024);
  for (let end = size; end > 0;) {
    const start = Math.max(0, end - chunk.length);
    const { bytesRead } = await handle.read(chunk, 0, end - start, start);
    const nl = chunk.subarray(0, bytesRead).lastIndexOf(NEWLINE);
    if (nl !== -1) return start + nl + 1;
    end = start;
  }
  return 0;
}
