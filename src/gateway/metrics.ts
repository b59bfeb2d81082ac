import { Counter, Gauge, Histogram, Registry, Summary, collectDefaultMetrics } from 'prom-client';
import type { MultiplierBoard } from '../pressure/follower/board.js';
import type { LeaseEvent } from '../quota/leases.js';
import { HotCounter } from './hot-counter.js';
import type { UpstreamPool } from './upstreams.js';

/** The gateway's counters by name: what each counts. */
const COUNTER_HELP = {
  sluice_decisions_total:
    'Quota decisions by outcome (allowed, limited, shadow_limited: refused by the quota, admitted by shadow mode, insured, error), class and node',
  sluice_frames_total:
    'Client WebSocket frames by type (EVENT, REQ, CLOSE, AUTH, COUNT, OTHER, MALFORMED, OVERSIZED), and refusals by reason (INVALID_SIGNATURE, DUPLICATE, BLOCKED kind, POW too low, RESTRICTED subscription or filter cap, AUTH_REQUIRED, AUTH_REFUSED)',
  sluice_upstream_errors_total: 'Requests or connections that failed to reach a relay node',
  sluice_websocket_upgrades_refused_total:
    'WebSocket upgrades answered without a connection, by reason (bad-request, per-address, no-relay, relay-answered, relay-unreachable, relay-failed, internal)',
  sluice_slow_clients_total:
    'Clients not reading what is written to them: paused (reading from them stopped) or closed (1008, past the buffered bound)',
  sluice_internal_errors_total:
    'Unexpected errors caught by a last-resort handler, by where they were caught',
  sluice_node_budget_decisions_total:
    "Writes charged to a relay node's write budget (upstreams[].writeBudget, only while its multiplier is below 1), by outcome (allowed, limited: refused by the budget, shadow_limited, insured, error) and node",
  sluice_websockets_drained_total:
    'WebSocket connections moved off a relay node in trouble (pressure.drain: NOTICE, then close 1013), by node',
  sluice_lease_points_total:
    'Quota points of leases (quotas.lease), by event: leased from Valkey, spent on admitted writes, refunded to the lease (a write the relay refused or had already), returned to Valkey, expired unspent with their window; credited: spent before their take (quotas.lease.credit), overcredited: of those, admitted without a grant (the take failed, or another gateway had taken)',
} as const;
type CounterName = keyof typeof COUNTER_HELP;
/** Each counter's labels. */
const COUNTER_LABELS: Record<CounterName, readonly string[]> = {
  sluice_decisions_total: ['outcome', 'class', 'node'],
  sluice_frames_total: ['type'],
  sluice_upstream_errors_total: ['node'],
  sluice_websocket_upgrades_refused_total: ['reason'],
  sluice_slow_clients_total: ['action'],
  sluice_internal_errors_total: ['where'],
  sluice_lease_points_total: ['event'],
  sluice_node_budget_decisions_total: ['outcome', 'node'],
  sluice_websockets_drained_total: ['node'],
};

/** The gateway's Prometheus metrics, on a registry of its own. */
export class GatewayMetrics {
  readonly registry = new Registry();
  /** Counted for every charge: no label hashing per write (hot-counter.ts). */
  readonly decisions = this.hot('sluice_decisions_total');
  readonly valkeyCall = new Histogram({
    name: 'sluice_valkey_call_seconds',
    help: 'Duration of quota calls that reached Valkey',
    labelNames: ['client', 'result'] as const,
    buckets: [0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1],
    registers: [this.registry],
  });
  readonly openWebSockets = new Gauge({
    name: 'sluice_websockets_open',
    help: 'Client WebSocket connections currently open',
    registers: [this.registry],
  });
  /** Counted for every client frame (hot-counter.ts). */
  readonly frames = this.hot('sluice_frames_total');
  readonly upstreamErrors = this.counter('sluice_upstream_errors_total');
  readonly upgradesRefused = this.counter('sluice_websocket_upgrades_refused_total');
  readonly slowClients = this.counter('sluice_slow_clients_total');
  /** Anything thrown that no handler expected; a test asserts it stays 0. */
  readonly internalErrors = this.counter('sluice_internal_errors_total');
  /** With leases on, every admitted write counts a spent point (hot-counter.ts). */
  readonly leasePoints = this.hot('sluice_lease_points_total');
  /** Every write under pressure is charged to its node's budget (hot-counter.ts). */
  readonly nodeBudgetDecisions = this.hot('sluice_node_budget_decisions_total');

  /** Count a write charged to a node's write budget. */
  countNodeBudget(outcome: string, node: string): void {
    this.nodeBudgetDecisions.add(1, outcome, node);
  }

  /** Count a client frame by type, or a refusal by reason (sluice_frames_total). */
  countFrame(type: string): void {
    this.frames.add(1, type);
  }

  readonly drained = this.counter('sluice_websockets_drained_total');

  /** A connection was asked to leave its node (pressure.drain). */
  countDrained(node: string): void {
    this.drained.inc({ node });
  }

  /** Count leased points by what happened to them. */
  countLeasePoints(event: LeaseEvent, points: number): void {
    this.leasePoints.add(points, event);
  }

  /** Sampled at scrape time from what countTrackedClients() was given. */
  private trackedClientsSource: () => Record<string, number> = () => ({});
  readonly trackedClients = new Gauge({
    name: 'sluice_tracked_clients',
    help: 'Clients held in memory per structure: identity-keys, range-identities and frame-rate hold at most limits.maxTrackedClients, in-memory-blocks and insurance at most that per quota counter',
    labelNames: ['structure'] as const,
    registers: [this.registry],
    collect: () => {
      for (const [structure, count] of Object.entries(this.trackedClientsSource())) {
        this.trackedClients.set({ structure }, count);
      }
    },
  });

  /** Where sluice_tracked_clients reads its counts from. */
  countTrackedClients(source: () => Record<string, number>): void {
    this.trackedClientsSource = source;
  }

  /** nostr.trust: the set in force, and each refresh's outcome (ok, failed). */
  readonly trustPubkeys = new Gauge({
    name: 'sluice_trust_pubkeys',
    help: 'Pubkeys in the nostr.trust set in force (the follow graph read from the relay)',
    registers: [this.registry],
  });
  readonly trustRefreshes = new Counter({
    name: 'sluice_trust_refreshes_total',
    help: 'Refreshes of the nostr.trust set, by outcome (failed: the set in force stays)',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });

  readonly propagation = new Summary({
    name: 'sluice_pressure_propagation_seconds',
    help: 'From a feed sampling to this gateway applying its report (clocks of one machine)',
    percentiles: [0.5, 0.9, 0.99],
    maxAgeSeconds: 600,
    ageBuckets: 5,
    registers: [this.registry],
  });

  constructor(board: MultiplierBoard, pool: UpstreamPool) {
    collectDefaultMetrics({ register: this.registry, prefix: 'sluice_' });
    const multiplier = new Gauge({
      name: 'sluice_multiplier',
      help: 'Current limit multiplier per relay node',
      labelNames: ['node', 'source'] as const,
      registers: [this.registry],
      // Workers each hold the same board: /metrics of a cluster shows their mean, not a sum.
      aggregator: 'average',
    });
    board.onChange(() => {
      // Reset so a node's old source label does not linger beside its new one.
      multiplier.reset();
      for (const entry of board.list()) {
        multiplier.set({ node: entry.nodeId, source: entry.source }, entry.value);
      }
    });
    new Gauge({
      name: 'sluice_upstream_up',
      help: 'Whether a relay node is in rotation (1) or not (0)',
      labelNames: ['node'] as const,
      registers: [this.registry],
      aggregator: 'min',
      collect() {
        for (const node of pool.list()) this.set({ node: node.id }, node.healthy ? 1 : 0);
      },
    });
  }

  private hot(name: CounterName): HotCounter {
    return new HotCounter(name, COUNTER_HELP[name], COUNTER_LABELS[name], this.registry);
  }

  private counter(name: CounterName): Counter {
    const labelNames = COUNTER_LABELS[name];
    return new Counter({ name, help: COUNTER_HELP[name], labelNames, registers: [this.registry] });
  }

  countDecision(outcome: string, cls: string, node: string): void {
    this.decisions.add(1, outcome, cls, node);
  }
}
