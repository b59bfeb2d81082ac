import type { GatewayConfig } from '../config/schema.js';
import type { Headroom } from './upstreams.js';

type DrainSettings = GatewayConfig['pressure']['drain'];

/** How often the drainer looks at the fleet: a second's allowance is spread over 4 ticks. */
export const DRAIN_TICK_MS = 250;

/** What a drained client is told, before its close. */
export function drainNotice(nodeId: string): string {
  return (
    `relay node ${nodeId} is short of memory headroom: this connection is being moved, ` +
    'reconnect and you will be routed to a node with room (events without an OK were not stored)'
  );
}

/** The close reason (1013, try again later): at most 123 bytes. */
export const DRAIN_CLOSE_REASON = 'try again later: reconnect to reach a relay node with headroom';

/**
 * The nodes in trouble: healthy, with headroom (multiplier, 0 in emergency) below
 * `belowShareOfBest` x the best healthy node's. None while no healthy node has headroom:
 * there is then nowhere better to send anyone.
 */
export function troubledNodes(
  nodes: readonly { id: string; healthy: boolean }[],
  headroom: Headroom,
  belowShareOfBest: number,
): Set<string> {
  const troubled = new Set<string>();
  let best = 0;
  for (const n of nodes) if (n.healthy) best = Math.max(best, headroom(n.id));
  if (best <= 0) return troubled;
  for (const n of nodes) {
    if (n.healthy && headroom(n.id) < belowShareOfBest * best) troubled.add(n.id);
  }
  return troubled;
}

/**
 * How many connections of a node may be moved now: in any one second at most
 * max(minPerSec, floor(sharePerSec x open)) (never all but the last few at once), spread over
 * the ticks of the second. Time is injected, so the pacing is tested without waiting.
 */
export class DrainPacer {
  /** When each move of the last second happened, per node. */
  private readonly recent = new Map<string, number[]>();

  constructor(
    private readonly settings: Pick<DrainSettings, 'sharePerSec' | 'minPerSec'>,
    private readonly now: () => number,
    private readonly tickMs = DRAIN_TICK_MS,
  ) {}

  /** Moves allowed now for a node holding `open` connections not already leaving. */
  allowance(nodeId: string, open: number): number {
    if (open <= 0) return 0;
    const { sharePerSec, minPerSec } = this.settings;
    const perSec = Math.min(open, Math.max(minPerSec, Math.floor(sharePerSec * open)));
    const perTick = Math.ceil((perSec * this.tickMs) / 1000);
    return Math.max(0, Math.min(perTick, perSec - this.inLastSecond(nodeId)));
  }

  /** `count` connections of the node were just moved. */
  record(nodeId: string, count: number): void {
    const t = this.now();
    const times = this.recent.get(nodeId) ?? [];
    for (let i = 0; i < count; i++) times.push(t);
    this.recent.set(nodeId, times);
  }

  private inLastSecond(nodeId: string): number {
    const times = this.recent.get(nodeId);
    if (!times) return 0;
    const since = this.now() - 1000;
    while (times.length > 0 && times[0]! <= since) times.shift();
    if (times.length === 0) this.recent.delete(nodeId);
    return times.length;
  }
}

/** A client connection as the drainer sees it. */
export interface Drainable {
  readonly nodeId: string;
  /** Nothing queued from the client and no forwarded EVENT awaiting the relay's OK. */
  readonly idle: boolean;
  /** Already chosen: finishing its pending frames before its close. */
  readonly leaving: boolean;
  /** Stop reading, let pending OKs arrive (at most settleMs), then NOTICE and close 1013. */
  leave(notice: string, reason: string): void;
}

/**
 * On a timer (never driven by traffic): moves connections off the nodes in trouble, idle
 * ones first (nothing of theirs is in flight), at the pacer's rate.
 */
export class ConnectionDrainer {
  private timer: NodeJS.Timeout | undefined;
  private readonly pacer: DrainPacer;

  constructor(
    private readonly connections: Iterable<Drainable>,
    private readonly nodes: () => readonly { id: string; healthy: boolean }[],
    private readonly headroom: Headroom,
    private readonly settings: DrainSettings,
    private readonly onDrained: (nodeId: string) => void,
    now: () => number = Date.now,
  ) {
    this.pacer = new DrainPacer(settings, now);
  }

  start(): void {
    this.timer = setInterval(() => this.tick(), DRAIN_TICK_MS);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /** One look at the fleet: returns how many connections were asked to leave, per node. */
  tick(): Map<string, number> {
    const moved = new Map<string, number>();
    const troubled = troubledNodes(this.nodes(), this.headroom, this.settings.belowShareOfBest);
    if (troubled.size === 0) return moved;
    const byNode = new Map<string, Drainable[]>();
    for (const conn of this.connections) {
      if (conn.leaving || !troubled.has(conn.nodeId)) continue;
      let list = byNode.get(conn.nodeId);
      if (!list) byNode.set(conn.nodeId, (list = []));
      list.push(conn);
    }
    for (const [nodeId, conns] of byNode) {
      const n = this.pacer.allowance(nodeId, conns.length);
      if (n === 0) continue;
      // Idle first (stable sort keeps the oldest first within each group).
      const chosen = [...conns].sort((a, b) => Number(b.idle) - Number(a.idle)).slice(0, n);
      const notice = drainNotice(nodeId);
      for (const conn of chosen) {
        conn.leave(notice, DRAIN_CLOSE_REASON);
        this.onDrained(nodeId);
      }
      this.pacer.record(nodeId, chosen.length);
      moved.set(nodeId, chosen.length);
    }
    return moved;
  }
}
