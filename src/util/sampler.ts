/**
 * One in a stretch of events, for logs that must not grow with a flood: the first event is
 * taken, then at most one per interval, each taken one carrying how many it stands for.
 */
export class IntervalSampler {
  private nextAt = 0;
  private since = 0;

  constructor(
    private readonly intervalMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** The events since the last one taken, this one included, when this one is taken; else 0. */
  take(): number {
    this.since++;
    const now = this.now();
    if (now < this.nextAt) return 0;
    this.nextAt = now + this.intervalMs;
    const count = this.since;
    this.since = 0;
    return count;
  }
}
