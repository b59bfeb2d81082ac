/** Where a node's current multiplier came from. */
export type MultiplierSource = 'default' | 'admin' | 'feed';

export interface NodeMultiplier {
  nodeId: string;
  /** In [0, 1]: the share of the base quota that writes to this node get. */
  value: number;
  source: MultiplierSource;
  /** When the value was set (ms since the epoch). */
  updatedAt: number;
  /** The feed's state as the gateway sees it (cold, fresh, holding, safe, recovering). */
  feedState?: string;
  /** The feed's last report says the node is in emergency. */
  emergency?: boolean;
}

/**
 * The gateway's view of each relay node's limit multiplier. Read on every decision, so it is
 * a plain in-memory map: values arrive from the admin endpoint (and from the pressure feed),
 * never from a per-request Valkey read.
 */
export class MultiplierBoard {
  private readonly nodes = new Map<string, NodeMultiplier>();
  private readonly listeners: ((m: NodeMultiplier) => void)[] = [];
  /** Static values from the admin endpoint; they win over the feed until cleared. */
  private readonly overrides = new Map<string, number>();
  /** The latest feed-derived value per node, kept while an override or a switch hides it. */
  private readonly fromFeed = new Map<
    string,
    { value: number; state: string; emergency: boolean }
  >();
  private adaptive = false;

  constructor(
    nodeIds: readonly string[],
    private readonly now: () => number = Date.now,
  ) {
    for (const nodeId of nodeIds) this.set(nodeId, 1, 'default');
  }

  get(nodeId: string): NodeMultiplier {
    const entry = this.nodes.get(nodeId);
    if (!entry) throw new RangeError(`unknown relay node "${nodeId}"`);
    return entry;
  }

  /** What routing reads: the node's multiplier, 0 while its feed reports an emergency. */
  headroom(nodeId: string): number {
    const entry = this.get(nodeId);
    return entry.emergency ? 0 : entry.value;
  }

  has(nodeId: string): boolean {
    return this.nodes.has(nodeId);
  }

  /** The board's entry is always derived: override, else feed (if adaptive), else 1.0. */
  private set(
    nodeId: string,
    value: number,
    source: MultiplierSource,
    feed?: Pick<NodeMultiplier, 'feedState' | 'emergency'>,
  ): NodeMultiplier {
    const entry: NodeMultiplier = { nodeId, value, source, updatedAt: this.now(), ...feed };
    this.nodes.set(nodeId, entry);
    for (const listener of this.listeners) listener(entry);
    return entry;
  }

  /** Pin a node's multiplier (admin), or clear the pin with null. */
  setOverride(nodeId: string, value: number | null): NodeMultiplier {
    this.get(nodeId);
    if (value === null) {
      this.overrides.delete(nodeId);
    } else {
      if (!Number.isFinite(value) || value < 0 || value > 1) {
        throw new RangeError(`a multiplier must be within [0, 1], got ${value}`);
      }
      this.overrides.set(nodeId, value);
    }
    return this.refresh(nodeId);
  }

  hasOverride(nodeId: string): boolean {
    return this.overrides.has(nodeId);
  }

  /** Turn adaptation on or off; off puts every node without an override back at 1.0. */
  setAdaptive(enabled: boolean): void {
    this.adaptive = enabled;
    for (const nodeId of this.nodes.keys()) this.refresh(nodeId);
  }

  get isAdaptive(): boolean {
    return this.adaptive;
  }

  /** A value derived from the node's feed (already through the staleness rules). */
  applyFeed(nodeId: string, value: number, state: string, emergency: boolean): void {
    if (!this.nodes.has(nodeId)) return;
    const previous = this.fromFeed.get(nodeId);
    this.fromFeed.set(nodeId, { value, state, emergency });
    const current = this.nodes.get(nodeId)!;
    if (
      previous &&
      previous.value === value &&
      previous.state === state &&
      previous.emergency === emergency &&
      current.source === 'feed'
    ) {
      return; // nothing changed: no listener churn on every evaluation
    }
    this.refresh(nodeId);
  }

  private refresh(nodeId: string): NodeMultiplier {
    const pinned = this.overrides.get(nodeId);
    if (pinned !== undefined) return this.set(nodeId, pinned, 'admin');
    const feed = this.fromFeed.get(nodeId);
    if (this.adaptive && feed) {
      return this.set(nodeId, feed.value, 'feed', {
        feedState: feed.state,
        emergency: feed.emergency,
      });
    }
    return this.set(nodeId, 1, 'default');
  }

  list(): NodeMultiplier[] {
    return [...this.nodes.values()];
  }

  onChange(listener: (m: NodeMultiplier) => void): void {
    this.listeners.push(listener);
    for (const entry of this.nodes.values()) listener(entry);
  }
}
