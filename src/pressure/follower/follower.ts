import type { FastifyBaseLogger } from 'fastify';
import type { GatewayConfig } from '../../config/schema.js';
import type { MultiplierBoard } from './board.js';
import { PRESSURE_CHANNEL, decodeReport, pressureKey } from '../report.js';
import type { PressureReport } from '../report.js';
import { createFeedTracker } from './staleness.js';
import type { LearnedBudgets } from '../budget/learned.js';
import type { FeedValue } from './staleness.js';
import type { Store, Subscription } from '../../store/index.js';

interface NodeFeed {
  tracker: ReturnType<typeof createFeedTracker>;
  last?: PressureReport;
  lastRepairAt: number;
}

/**
 * Keeps the board in step with the pressure feeds: reports arrive by pub/sub within
 * milliseconds; a node that looks stale is re-read from its leased key (which also covers
 * messages lost while the subscriber reconnected). Staleness rules live in the tracker.
 */
export class PressureFollower {
  private readonly feeds = new Map<string, NodeFeed>();
  private subscription: Subscription | undefined;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly settings: GatewayConfig['pressure'],
    private readonly board: MultiplierBoard,
    /** Reads leased reports and subscribes to live ones. */
    private readonly store: Pick<Store, 'kv' | 'subscribe'>,
    private readonly log: FastifyBaseLogger,
    /** Seconds from a feed's sample to this gateway applying it. */
    private readonly observePropagation: (seconds: number) => void = () => undefined,
    private readonly now: () => number = Date.now,
    /** Where the budgets the feeds learned go (pressure/budget/learned.ts). */
    private readonly learned?: LearnedBudgets,
  ) {
    for (const node of board.list()) {
      this.feeds.set(node.nodeId, {
        tracker: createFeedTracker({
          safeValue: settings.safeMultiplier,
          staleAfterSec: settings.staleAfterMs / 1000,
          holdSec: settings.holdMs / 1000,
          freshReportsToTrust: settings.freshReportsToTrust,
          rUpPerSec: settings.rampUpPerSec,
        }),
        lastRepairAt: 0,
      });
    }
  }

  async start(): Promise<void> {
    this.board.setAdaptive(true);
    this.subscription = await this.store.subscribe(PRESSURE_CHANNEL, (text) => {
      const report = decodeReport(text);
      if (report) this.accept(report, true);
    });
    await Promise.all([...this.feeds.keys()].map((node) => this.repair(node)));
    this.evaluate();
    this.timer = setInterval(() => this.evaluate(), this.settings.evaluateMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.subscription?.close();
  }

  /** Take a report if it is newer than the last one of its node (seq restarts with the feed). */
  private accept(report: PressureReport, live = false): void {
    const feed = this.feeds.get(report.node);
    if (!feed) return;
    if (feed.last && report.ts <= feed.last.ts && report.seq <= feed.last.seq) return;
    feed.last = report;
    // A report without a (valid) budget leaves the last good one: see LearnedBudgets.
    if (report.budget) this.learned?.set(report.node, { ...report.budget, ts: report.ts });
    const now = this.now();
    feed.tracker.report(now / 1000, report.m);
    // Only live messages measure propagation: a key read back is up to a lease old by design.
    if (live) this.observePropagation((now - report.ts) / 1000);
    this.apply(report.node, feed, now);
  }

  /** Put the tracker's current value on the board; returns it. */
  private apply(node: string, feed: NodeFeed, now: number): FeedValue {
    const v = feed.tracker.value(now / 1000);
    const emergency = v.state === 'fresh' && feed.last?.mode === 'emergency';
    this.board.applyFeed(node, v.m, v.state, emergency);
    return v;
  }

  private evaluate(): void {
    const now = this.now();
    for (const [node, feed] of this.feeds) {
      const v = this.apply(node, feed, now);
      if (v.state !== 'fresh' && now - feed.lastRepairAt >= this.settings.staleAfterMs) {
        feed.lastRepairAt = now;
        void this.repair(node);
      }
    }
  }

  /** Read the node's leased key: the current report if its feed is alive. */
  private async repair(node: string): Promise<void> {
    try {
      const report = decodeReport(await this.store.kv.get(pressureKey(node)));
      if (report) this.accept(report);
    } catch (err) {
      this.log.debug({ err, node }, 'reading the pressure key failed');
    }
  }
}
