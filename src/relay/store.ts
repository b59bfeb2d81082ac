import type { NostrEvent } from 'nostr-tools/pure';
import type { IndexStore } from './index-store.js';
import type { Memtable } from './memtable.js';
import { REJECT_REASONS, checkEvent } from './validate.js';
import type { RejectReason } from './validate.js';
import { burnCpu } from './work.js';

export type SubmitResult =
  | { accepted: true; id: string; duplicate: boolean }
  | { accepted: false; id: string; message: string };

export interface StoreOptions {
  maxEventBytes: number;
  workIterations: number;
  /** false: store events whose signature does not verify (a relay that does not check). */
  verifySignatures?: boolean;
}

export type StoredListener = (event: NostrEvent, json: string) => void;

/**
 * The write path shared by WebSocket and HTTP: validate, do the configured CPU work, drop
 * duplicates, append to the memtable, index, and tell live subscriptions. It is synchronous,
 * so two copies of one event can never both be stored.
 */
export class EventStore {
  accepted = 0;
  duplicates = 0;
  readonly rejected = Object.fromEntries(REJECT_REASONS.map((r) => [r, 0])) as Record<
    RejectReason,
    number
  >;
  /** The chained digest of all CPU work done so far (see burnCpu). */
  workDigest: Buffer = Buffer.alloc(32);
  private readonly listeners: StoredListener[] = [];

  constructor(
    private readonly index: IndexStore,
    private readonly memtable: Memtable,
    readonly options: StoreOptions,
  ) {}

  onStored(listener: StoredListener): void {
    this.listeners.push(listener);
  }

  submit(raw: unknown): SubmitResult {
    const verdict = checkEvent(
      raw,
      this.options.maxEventBytes,
      (id) => this.index.has(id),
      this.options.verifySignatures !== false,
    );
    if (!verdict.ok) {
      this.rejected[verdict.reason]++;
      return { accepted: false, id: verdict.id, message: verdict.message };
    }
    const { event, json, bytes } = verdict;
    let record: string | Buffer = json + '\n';
    // The work runs for every valid write, duplicates included, so a benchmark can replay a
    // fixed pool of signed events and still make the relay pay per write.
    if (this.options.workIterations > 0) {
      record = Buffer.from(record);
      this.workDigest = burnCpu(record, this.options.workIterations, this.workDigest);
    }
    if (this.index.has(event.id)) {
      this.duplicates++;
      return { accepted: true, id: event.id, duplicate: true };
    }
    const pos = this.memtable.append(record);
    this.index.add({
      id: event.id,
      pubkey: event.pubkey,
      createdAt: event.created_at,
      kind: event.kind,
      pos,
      len: bytes,
    });
    this.accepted++;
    for (const listener of this.listeners) listener(event, json);
    return { accepted: true, id: event.id, duplicate: false };
  }
}
