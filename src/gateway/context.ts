import type { AdmittedTally } from '../pressure/budget/admitted-tally.js';
import type { FastifyBaseLogger } from 'fastify';
import type { GatewayConfig } from '../config/schema.js';
import type { MultiplierBoard } from '../pressure/follower/board.js';
import type { QuotaDecider } from '../quota/decider.js';
import type { Policy } from '../quota/policy.js';
import type { Store } from '../store/index.js';
import type { Admission } from './admission.js';
import type { ClientAddress } from './client-address.js';
import type { GatewayMetrics } from './metrics.js';
import type { UpstreamPool } from './upstreams.js';

/** Everything the HTTP, WebSocket and admin handlers share. */
export interface GatewayContext {
  config: GatewayConfig;
  store: Store;
  policy: Policy;
  board: MultiplierBoard;
  decider: QuotaDecider;
  /** Set once the context exists: identity, cost and quota decisions for both protocols. */
  admission: Admission;
  pool: UpstreamPool;
  metrics: GatewayMetrics;
  address: ClientAddress;
  log: FastifyBaseLogger;
  /** Writes forwarded per node, batched to Valkey for the feeds (pressure on; else absent). */
  admittedTally?: AdmittedTally;
}
