/**
 * A gateway's tally of the writes it forwarded to each relay node, added to the node's counter
 * in Valkey in batches (store/admitted.ts), for its feed to learn what the node drains.
 *
 * The hot path only adds two numbers to an in-memory entry (note()): no promise, no Valkey
 * command per write. A timer flushes every flushMs (250 ms): one script call per node that
 * had writes, so a gateway sends at most (nodes x 4) commands a second whatever its write
 * rate. A flush that fails keeps its counts for the next one (bounded: a node's entry is two
 * numbers), so Valkey being down loses nothing but time; counts are whole numbers.
 */
import type { AdmittedCounts } from '../../store/admitted.js';

export const ADMITTED_FLUSH_MS = 250;

export class AdmittedTally {
  private readonly pending = new Map<string, { bytes: number; points: number }>();
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> | undefined;

  constructor(
    private readonly counts: Pick<AdmittedCounts, 'add'>,
    nodeIds: readonly string[],
    private readonly onError: (err: unknown) => void = () => undefined,
  ) {
    // One entry per configured node, made once: note() never allocates.
    for (const id of nodeIds) this.pending.set(id, { bytes: 0, points: 0 });
  }

  /** A write of `bytes` (the EVENT message or request body) costing `points` went to the node. */
  note(nodeId: string, bytes: number, points: number): void {
    const entry = this.pending.get(nodeId);
    if (!entry) return;
    entry.bytes += Math.max(0, Math.round(bytes));
    entry.points += Math.max(0, Math.round(points));
  }

  start(flushMs = ADMITTED_FLUSH_MS): void {
    this.timer = setInterval(() => void this.flush(), flushMs);
    this.timer.unref();
  }

  /** Stop the timer and flush what is left (best effort). */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.flushing;
    await this.flush();
  }

  /** Send each node's counts since the last flush; one at a time (a slow Valkey never piles up). */
  flush(): Promise<void> {
    if (this.flushing) return this.flushing;
    this.flushing = (async () => {
      for (const [nodeId, entry] of this.pending) {
        if (entry.bytes === 0 && entry.points === 0) continue;
        const { bytes, points } = entry;
        entry.bytes = 0;
        entry.points = 0;
        try {
          await this.counts.add(nodeId, bytes, points);
        } catch (err) {
          // Kept for the next flush.
          entry.bytes += bytes;
          entry.points += points;
          this.onError(err);
        }
      }
    })().finally(() => {
      this.flushing = undefined;
    });
    return this.flushing;
  }
}
