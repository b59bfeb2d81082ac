/**
 * The scaled-down real run (issue 33, part 2): its settings, the identities of its clients
 * and the gateway configuration each process runs with. Pure: the run itself is fleet-run.ts.
 */
import { makeIdentity } from '../../quota/policy.js';
import { DEFAULT_KEY_SALT } from '../../store/keys.js';
import { keySlot } from './slots.js';

export interface FleetRunConfig {
  /** Gateway processes, each on a loopback address of its own (127.0.0.2, .3, ...). */
  gateways: number;
  /** Live identities (Zipf ranks); each writes through one gateway. */
  identities: number;
  zipf: number;
  /** Offered writes per second over the whole fleet (open loop). */
  writesPerSec: number;
  /** Share of all writes that go to the hot key, through every gateway in turn. */
  hotShare: number;
  /** The write quota of every identity: points per window. */
  limit: number;
  /** Longer than the run: every key has one window of its counter in it (see bound). */
  windowSec: number;
  durationSec: number;
  /** Seconds into the run: the hot key's primary is killed (SIGKILL). */
  killAtSec: number;
  /** Seconds into the run: the hot key's slot starts moving to another primary. */
  migrateAtSec: number;
  /** Pause between the keys moved, so the migration lasts under load (ASK answers). */
  migrateKeyPauseMs: number;
  /** The cluster's cluster-node-timeout: how soon a replica takes over a dead primary. */
  nodeTimeoutMs: number;
  /** Subscribers of the pressure channel beside the gateways (connections in one process). */
  subscribers: number;
  /** Reports published to measure publish-to-applied, and how often. */
  reports: number;
  reportsPerSec: number;
  /** First port of the run's own 6-node cluster (its buses at +10000). */
  clusterBasePort: number;
  /** Requests in flight per gateway at most; a write due while all are busy waits. */
  maxInFlightPerGateway: number;
  seed: number;
}

export const FLEET_DEFAULTS: FleetRunConfig = {
  gateways: 12,
  identities: 1_000_000,
  zipf: 1,
  writesPerSec: 300,
  hotShare: 0.1,
  limit: 450,
  windowSec: 300,
  durationSec: 60,
  killAtSec: 12,
  migrateAtSec: 35,
  migrateKeyPauseMs: 100,
  nodeTimeoutMs: 1000,
  subscribers: 100,
  reports: 200,
  reportsPerSec: 20,
  clusterBasePort: 7440,
  maxInFlightPerGateway: 64,
  seed: 1,
};

export const FLEET_NODE = 'relay-a';
export const FLEET_ADMIN_TOKEN = 'bench-scale-fleet-admin-token-0123456789';
export const FLEET_KEY_SALT = DEFAULT_KEY_SALT;

/** The loopback address gateway `g` listens on (127.0.0.1 is the load's own). */
export function gatewayHost(g: number): string {
  if (g < 0 || g > 250) throw new RangeError(`gateway ${g}: at most 251 on 127.0.0.0/24`);
  return `127.0.0.${g + 2}`;
}

/** The client address of identity `id` (X-Forwarded-For): 10.0.0.0/8 holds 16M of them. */
export function identityAddress(id: number): string {
  if (!Number.isInteger(id) || id < 0 || id >= 1 << 24) {
    throw new RangeError(`identity ${id}: 0 to 16,777,215`);
  }
  return `10.${(id >>> 16) & 255}.${(id >>> 8) & 255}.${id & 255}`;
}

/** The hot key's client: an address outside the identities' range (TEST-NET-1). */
export const HOT_ADDRESS = '192.0.2.77';

/** The cluster slot of a client's counters, as the gateways key an address. */
export function slotOfAddress(address: string, salt: string = FLEET_KEY_SALT): number {
  return keySlot(makeIdentity('ip', address, 'default', salt).key);
}

/** The configuration of gateway `g`: shipped defaults but for what the run must fix. */
export function fleetGatewayConfig(
  cfg: FleetRunConfig,
  g: number,
  seed: { host: string; port: number },
  relayUrl: string,
  keyPrefix: string,
): Record<string, unknown> {
  const host = gatewayHost(g);
  return {
    listen: { host, port: 0 },
    admin: { host, port: 0, token: FLEET_ADMIN_TOKEN },
    valkey: { mode: 'cluster', nodes: [`${seed.host}:${seed.port}`] },
    upstreams: [{ id: FLEET_NODE, url: relayUrl }],
    // The load names its clients in X-Forwarded-For, from 127.0.0.1.
    trustedProxies: ['127.0.0.1'],
    logging: { level: 'warn', requests: false },
    workers: 1,
    identity: { order: ['ip'] },
    // The multiplier's reports arrive by pub/sub; nothing but the run publishes them.
    pressure: { enabled: true },
    quotas: {
      gateways: cfg.gateways,
      keyPrefix,
      tiers: { default: { write: { points: cfg.limit, windowSec: cfg.windowSec } } },
    },
  };
}
