/** Where a node's current multiplier came from. */
export type MultiplierSource = 'default' | 'admin' | 'feed';

export interface NodeMultiplier {
  nodeId: string;
  /** In [0, 1]: the share of the base quota that writes to this node get. */
  value: number;
  source: MultiplierSource;
  /** When the value was set (ms since the epoch). */
  updatedAt: number;
}

/**
 * The gateway's view of each relay node's limit multiplier. Read on every decision, so it is
 * a plain in-memory map: values arrive from the admin endpoint (and from the pressure feed),
 * never from a per-request Valkey read.
 */
export class MultiplierBoard {
  private readonly nodes = new Map<string, NodeMultiplier>();
  private readonly listeners: ((m: NodeMultiplier) => void)[] = [];

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

  has(nodeId: string): boolean {
    return this.nodes.has(nodeId);
  }

  set(nodeId: string, value: number, source: MultiplierSource): NodeMultiplier {
    if (!Number.isFinite(value) || value < 0 || value > 1) {
      throw new RangeError(`a multiplier must be within [0, 1], got ${value}`);
    }
    const entry = { nodeId, value, source, updatedAt: this.now() };
    this.nodes.set(nodeId, entry);
    for (const listener of this.listeners) listener(entry);
    return entry;
  }

  list(): NodeMultiplier[] {
    return [...this.nodes.values()];
  }

  onChange(listener: (m: NodeMultiplier) => void): void {
    this.listeners.push(listener);
    for (const entry of this.nodes.values()) listener(entry);
  }
}
