import type { DataFile, RecordMeta } from './datafile.js';
import { matchesMeta, matchesTags } from './filter.js';
import type { EventMeta, Filter } from './filter.js';
import type { Memtable } from './memtable.js';

/** How many candidate events a tag query reads per round while looking for matches. */
const TAG_READ_BATCH = 64;

/**
 * Every stored event, as a few numbers in typed columns plus its id: about 150 bytes an
 * event whatever its size, and nothing for the GC to trace but the id map. The event itself
 * lives at `pos` (see Memtable): in a slab until flushed, in the data file after.
 */
export class IndexStore {
  private readonly rowById = new Map<string, number>();
  private readonly ids: string[] = [];
  private readonly authorIds = new Map<string, number>();
  private readonly authors: string[] = [];
  private pos = new Float64Array(1024);
  private len = new Uint32Array(1024);
  private createdAt = new Float64Array(1024);
  private kind = new Uint16Array(1024);
  private author = new Uint32Array(1024);
  private rows = 0;
  /** Rows are in position order, so the ones below this cursor are all on disk. */
  private flushedRows = 0;

  constructor(
    private readonly memtable: Memtable,
    private readonly file: DataFile,
    readonly maxLimit: number,
  ) {}

  get size(): number {
    return this.rows;
  }

  has(id: string): boolean {
    return this.rowById.has(id);
  }

  add(meta: RecordMeta): void {
    if (this.rows === this.pos.length) this.grow();
    const row = this.rows++;
    let author = this.authorIds.get(meta.pubkey);
    if (author === undefined) {
      author = this.authors.push(meta.pubkey) - 1;
      this.authorIds.set(meta.pubkey, author);
    }
    this.rowById.set(meta.id, row);
    this.ids.push(meta.id);
    this.pos[row] = meta.pos;
    this.len[row] = meta.len;
    this.createdAt[row] = meta.createdAt;
    this.kind[row] = meta.kind;
    this.author[row] = author;
  }

  /** Events accepted but not completely on disk yet. */
  backlogEvents(): number {
    const head = this.memtable.headPos;
    while (
      this.flushedRows < this.rows &&
      this.pos[this.flushedRows]! + this.len[this.flushedRows]! <= head
    ) {
      this.flushedRows++;
    }
    return this.rows - this.flushedRows;
  }

  /**
   * The JSON of the events matching any filter, newest first (created_at descending, then
   * id), each filter's limit capped at maxLimit. Events stored after the call are not
   * included, so a caller can deliver those live without duplicates.
   */
  async query(filters: Filter[]): Promise<string[]> {
    const snapshot = this.rows;
    const found = new Map<number, string | undefined>();
    for (const filter of filters) {
      const limit = Math.min(filter.limit ?? this.maxLimit, this.maxLimit);
      if (limit === 0) continue;
      const rows = this.candidates(filter, snapshot).sort(this.newestFirst);
      if (!filter.tags) {
        for (const row of rows.slice(0, limit)) if (!found.has(row)) found.set(row, undefined);
        continue;
      }
      // Tags are not indexed: read candidates newest first until the limit is met.
      let taken = 0;
      for (let i = 0; i < rows.length && taken < limit; i += TAG_READ_BATCH) {
        const batch = rows.slice(i, i + TAG_READ_BATCH);
        const texts = await Promise.all(batch.map((row) => this.read(row)));
        for (let j = 0; j < batch.length && taken < limit; j++) {
          const event = JSON.parse(texts[j]!) as { tags: string[][] };
          if (matchesTags(filter, event.tags)) {
            found.set(batch[j]!, texts[j]);
            taken++;
          }
        }
      }
    }
    const rows = [...found.keys()].sort(this.newestFirst);
    return Promise.all(rows.map(async (row) => found.get(row) ?? (await this.read(row))));
  }

  private candidates(filter: Filter, snapshot: number): number[] {
    const meta: EventMeta = { id: '', pubkey: '', kind: 0, created_at: 0 };
    const matches = (row: number): boolean => {
      meta.id = this.ids[row]!;
      meta.pubkey = this.authors[this.author[row]!]!;
      meta.kind = this.kind[row]!;
      meta.created_at = this.createdAt[row]!;
      return matchesMeta(filter, meta);
    };
    const out: number[] = [];
    if (filter.ids) {
      for (const id of filter.ids) {
        const row = this.rowById.get(id);
        if (row !== undefined && row < snapshot && matches(row)) out.push(row);
      }
      return out;
    }
    for (let row = 0; row < snapshot; row++) if (matches(row)) out.push(row);
    return out;
  }

  private readonly newestFirst = (a: number, b: number): number => {
    const byTime = this.createdAt[b]! - this.createdAt[a]!;
    if (byTime !== 0) return byTime;
    const idA = this.ids[a]!;
    const idB = this.ids[b]!;
    return idA < idB ? -1 : idA > idB ? 1 : 0;
  };

  /** One event's JSON, from the memtable, the file, or both if a flush split it. */
  private async read(row: number): Promise<string> {
    const pos = this.pos[row]!;
    const len = this.len[row]!;
    const buf = Buffer.allocUnsafe(len);
    const head = this.memtable.headPos;
    // Copy the in-memory part before awaiting: the flusher may release its slab meanwhile,
    // but bytes below `head` are already in the file and stay there.
    if (pos + len > head) {
      const from = Math.max(pos, head);
      this.memtable.copyOut(from, pos + len - from, buf, from - pos);
    }
    if (pos < head) await this.file.readInto(pos, Math.min(len, head - pos), buf, 0);
    return buf.toString('utf8');
  }

  private grow(): void {
    const size = this.pos.length * 2;
    const grown = <T extends Float64Array | Uint32Array | Uint16Array>(old: T, next: T): T => {
      next.set(old);
      return next;
    };
    this.pos = grown(this.pos, new Float64Array(size));
    this.len = grown(this.len, new Uint32Array(size));
    this.createdAt = grown(this.createdAt, new Float64Array(size));
    this.kind = grown(this.kind, new Uint16Array(size));
    this.author = grown(this.author, new Uint32Array(size));
  }
}
