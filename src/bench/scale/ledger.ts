/**
 * What was admitted per key and window, against the limit: the simulation's ground truth.
 * A key's windows are its counter's, as Valkey started them; a window that starts while the
 * key's previous one would still run (a replica that lost the counter; an insured admission
 * with no counter) is merged into it, so the points the lost counter had admitted count
 * against the same limit as those admitted after. Admissions are placed by when Valkey
 * counted them (a plain consume) or when the gateway spent a leased or insured point; a
 * refusal by when it was answered.
 */

export interface WindowTally {
  start: number;
  end: number;
  admitted: number;
  /** Points asked for (admitted or refused). */
  demanded: number;
  /** Points the failover lost from this window's counter. */
  lost: number;
  /** Points admitted from a gateway's insured share (Valkey failing). */
  insured: number;
  /** Points admitted, not insured, while no counter of the key ran: Valkey never granted them. */
  ungranted: number;
}

interface KeyWindows {
  cur: WindowTally;
  prev: WindowTally | undefined;
}

/** Called with each window when it can no longer change (or at the end of the run). */
export type WindowSink = (key: string, w: WindowTally, complete: boolean) => void;

export class AdmissionLedger {
  private readonly keys = new Map<string, KeyWindows>();
  /** Points refused to a key that had no window yet (nothing counted it). */
  refusedWithoutWindow = 0;
  /** Points admitted, not insured, while no counter of the key ran: Valkey never granted them. */
  unplaced = 0;

  constructor(
    private readonly windowMs: number,
    private readonly sink: WindowSink,
  ) {}

  windowStarted(key: string, start: number, end: number): void {
    const k = this.keys.get(key);
    if (k && start < k.cur.end) {
      k.cur.start = Math.min(k.cur.start, start);
      k.cur.end = Math.max(k.cur.end, end);
      return;
    }
    const w = tally(start, end);
    if (!k) {
      this.keys.set(key, { cur: w, prev: undefined });
      return;
    }
    if (k.prev) this.sink(key, k.prev, true);
    k.prev = k.cur;
    k.cur = w;
  }

  lost(key: string, points: number, at: number): void {
    const w = this.windowAt(key, at);
    if (w) w.lost += points;
  }

  admit(key: string, at: number, cost: number, insured: boolean): void {
    let w = this.windowAt(key, at);
    if (!w) {
      // No counter runs: an insured point, or one Valkey never granted (counted: a bug if
      // not insured). It opens the window a counter would have started.
      this.windowStarted(key, at, at + this.windowMs);
      w = this.windowAt(key, at)!;
      if (!insured) {
        this.unplaced += cost;
        w.ungranted += cost;
      }
    }
    w.admitted += cost;
    w.demanded += cost;
    if (insured) w.insured += cost;
  }

  refuse(key: string, at: number, cost: number): void {
    const k = this.keys.get(key);
    const w = k
      ? at >= k.cur.start
        ? k.cur
        : k.prev && at >= k.prev.start
          ? k.prev
          : undefined
      : undefined;
    if (w) w.demanded += cost;
    else this.refusedWithoutWindow += cost;
  }

  /** Hand every window still held to the sink; those still running at `now` as incomplete. */
  finish(now: number): void {
    for (const [key, k] of this.keys) {
      if (k.prev) this.sink(key, k.prev, true);
      this.sink(key, k.cur, k.cur.end <= now);
    }
    this.keys.clear();
  }

  /** The window holding `at` (its start at or before it; the later of the two held). */
  private windowAt(key: string, at: number): WindowTally | undefined {
    const k = this.keys.get(key);
    if (!k) return undefined;
    if (at >= k.cur.start && at < k.cur.end) return k.cur;
    if (k.prev && at >= k.prev.start && at < k.prev.end) return k.prev;
    return undefined;
  }
}

function tally(start: number, end: number): WindowTally {
  return { start, end, admitted: 0, demanded: 0, lost: 0, insured: 0, ungranted: 0 };
}
