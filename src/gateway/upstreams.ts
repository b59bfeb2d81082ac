import type { GatewayConfig, Upstream } from '../config/schema.js';

export interface UpstreamState {
  id: string;
  url: string;
  healthy: boolean;
  consecutiveFailures: number;
  lastError?: string;
  lastCheckedAt?: number;
}

/**
 * A node's headroom for routing: its current multiplier, 0 when it is in emergency. The pool
 * reads it through this function only (the board stays the decider's).
 */
export type Headroom = (nodeId: string) => number;

export interface PoolOptions {
  /** Read by routing: headroom; every node has full headroom without it. */
  headroom?: Headroom;
  /** [0, 1), for the two random choices (tests inject a seeded one). */
  random?: () => number;
}

export interface PoolLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

/**
 * The relay nodes behind the gateway and their health. Active checks (GET the health path)
 * take a node out after consecutive failures and bring it back on the first success; proxied
 * requests that fail for the relay's own reasons count too (see blameOf in upstream-io.ts).
 */
export class UpstreamPool {
  private readonly nodes: UpstreamState[];
  private timer: NodeJS.Timeout | undefined;
  private rr = 0;
  private avoided: (id: string) => boolean = () => false;
  private readonly headroom: Headroom;
  private readonly random: () => number;

  constructor(
    upstreams: readonly Upstream[],
    private readonly routing: GatewayConfig['routing'],
    private readonly health: GatewayConfig['healthCheck'],
    private readonly log: PoolLog,
    options: PoolOptions = {},
  ) {
    this.nodes = upstreams.map((u) => ({
      id: u.id,
      url: u.url.replace(/\/$/, ''),
      healthy: true,
      consecutiveFailures: 0,
    }));
    this.headroom = options.headroom ?? (() => 1);
    this.random = options.random ?? Math.random;
  }

  async start(): Promise<void> {
    await this.checkAll();
    this.timer = setInterval(() => void this.checkAll(), this.health.intervalMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /** Nodes to steer new connections and non-sticky writes away from (e.g. in emergency). */
  avoid(predicate: (id: string) => boolean): void {
    this.avoided = predicate;
  }

  /** Whether pick reads the client's hash: sticky routing among more than one node. */
  hashesClients(): boolean {
    return this.routing === 'sticky' && this.nodes.length > 1;
  }

  /**
   * A healthy node for a client: sticky routing uses rendezvous hashing on the client's hash,
   * so a client keeps its node and only the clients of a failed node move. `fresh` marks a
   * choice that may be steered (a new connection, round-robin or headroom), away from
   * avoided nodes while others can take it. Headroom routing chooses anew on every call.
   */
  pick(clientHash: string, fresh = false): UpstreamState | undefined {
    const nodes = this.nodes;
    // One node (the common case): no hashing, no allocation.
    if (nodes.length === 1) return nodes[0]!.healthy ? nodes[0] : undefined;
    let healthy = nodes.filter((n) => n.healthy);
    if (healthy.length === 0) return undefined;
    if (fresh || this.routing !== 'sticky') {
      const preferred = healthy.filter((n) => !this.avoided(n.id));
      if (preferred.length > 0) healthy = preferred;
    }
    if (this.routing === 'round-robin') return healthy[this.rr++ % healthy.length];
    if (this.routing === 'headroom') return pickByHeadroom(healthy, this.headroom, this.random);
    let best: UpstreamState | undefined;
    let bestScore = -1;
    for (const node of healthy) {
      const score = rendezvousScore(node.id, clientHash);
      if (score > bestScore) {
        bestScore = score;
        best = node;
      }
    }
    return best;
  }

  get(id: string): UpstreamState | undefined {
    return this.nodes.find((n) => n.id === id);
  }

  list(): readonly UpstreamState[] {
    return this.nodes;
  }

  anyHealthy(): boolean {
    return this.nodes.some((n) => n.healthy);
  }

  /**
   * A proxied request to this node failed for the relay's own reasons (refused, reset, timed
   * out): never for what a client sent, did or was answered.
   */
  reportFailure(id: string, error: string): void {
    const node = this.get(id);
    if (node) this.recordFailure(node, error);
  }

  private async checkAll(): Promise<void> {
    await Promise.all(this.nodes.map((node) => this.check(node)));
  }

  private async check(node: UpstreamState): Promise<void> {
    node.lastCheckedAt = Date.now();
    try {
      const res = await fetch(node.url + this.health.path, {
        signal: AbortSignal.timeout(this.health.timeoutMs),
      });
      await res.body?.cancel();
      if (!res.ok) throw new Error(`health check answered ${res.status}`);
      node.consecutiveFailures = 0;
      node.lastError = undefined;
      if (!node.healthy) {
        node.healthy = true;
        this.log.info({ node: node.id }, 'relay node is back in rotation');
      }
    } catch (err) {
      this.recordFailure(node, (err as Error).message);
    }
  }

  private recordFailure(node: UpstreamState, error: string): void {
    node.consecutiveFailures++;
    node.lastError = error;
    if (node.healthy && node.consecutiveFailures >= this.health.failuresToDown) {
      node.healthy = false;
      this.log.warn({ node: node.id, error }, 'relay node taken out of rotation');
    }
  }
}

/**
 * Power of two choices by headroom: two distinct nodes drawn at random, the one with more
 * headroom wins (a tie goes to the first drawn, itself a random one of the two). Nodes with
 * no headroom (multiplier 0, or in emergency) are left out while any other can take the
 * write. Two random choices rather than "the best": every node with more headroom than some
 * other gets a share, so the fleet does not stampede onto one node between two feed reports.
 */
export function pickByHeadroom<T extends { id: string }>(
  nodes: readonly T[],
  headroom: Headroom,
  random: () => number,
): T | undefined {
  let open = nodes.filter((n) => headroom(n.id) > 0);
  if (open.length === 0) open = [...nodes];
  if (open.length <= 1) return open[0];
  const i = Math.min(open.length - 1, Math.floor(random() * open.length));
  let j = Math.min(open.length - 2, Math.floor(random() * (open.length - 1)));
  if (j >= i) j++;
  const a = open[i]!;
  const b = open[j]!;
  return headroom(b.id) > headroom(a.id) ? b : a;
}

/**
 * The rendezvous weight of a node for a client: FNV-1a over "id\0hash", finished with
 * murmur3's fmix32. Not a cryptographic hash, and need not be: the client hash is already a
 * salted HMAC, and this only spreads clients evenly (sha1 cost ~1% of a request's CPU here).
 */
export function rendezvousScore(nodeId: string, clientHash: string): number {
  let h = 0x811c9dc5;
  const text = `${nodeId}\0${clientHash}`;
  for (let i = 0; i < text.length; i++) {
    h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  }
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}
