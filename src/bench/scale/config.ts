/** One configuration of the scale simulation, its defaults and the derived settings. */
import { GatewayConfigSchema } from '../../config/schema.js';
import type { GatewayConfig } from '../../config/schema.js';
import { DATACENTER_HOP, LOOPBACK_HOP } from './latency.js';
import type { HopLatency } from './latency.js';

export interface ScaleConfig {
  gateways: number;
  /** Worker processes per gateway (each its own decider). */
  workers: number;
  primaries: number;
  /** Live identities (Zipf ranks). */
  identities: number;
  writesPerSec: number;
  /** Zipf exponent of identity popularity. */
  zipf: number;
  /** Share of all writes that go to the hot key, spread over every gateway. */
  hotShare: number;
  /** Each rank is handed to a new identity this often per second (arrivals and departures). */
  churnPerSec: number;
  /** The write quota: points per window. */
  limit: number;
  windowSec: number;
  /** Virtual seconds of traffic. */
  durationSec: number;
  leases: boolean;
  /** Fail the hot key's primary a third of the way in. */
  failover: boolean;
  failoverPauseMs: number;
  /** A CLIENT PAUSE of that primary instead (commands wait, nothing is lost). */
  pauseOnly?: boolean | undefined;
  /** Writes of this last stretch before the failover never reached the replica. */
  failoverLostMs: number;
  /** Migrate the hot key's slot to another primary, from half way in. */
  migration: boolean;
  migrationMs: number;
  /** Commands one primary serves per second. */
  serviceRatePerSec: number;
  hop: 'loopback' | 'datacenter';
  /**
   * Round trips measured beside a real run of this configuration (real-run.ts's probe): the
   * model's network and host then are those the real run met (see HopLatency.roundTripsMs).
   */
  measuredRoundTripsMs?: readonly number[] | undefined;
  timeoutMs: number;
  retryStoreAfterMs: number;
  /** Keys each decider tracks (quotas' maxTrackedClients). */
  maxTrackedClients: number;
  /** quotas.gateways as configured: the true count unless a test misconfigures it. */
  gatewaysSetting?: number | undefined;
  /**
   * Judge under-admission in windows still running at the end too (as of the end): for runs
   * shorter than a window, such as the real validation run.
   */
  judgeOpenWindows?: boolean | undefined;
  /** Counter key prefix (quotas.keyPrefix): a real run uses a fresh one. */
  keyPrefix?: string | undefined;
  /** The simulation's time resolution, ms. */
  tickMs: number;
  seed: number;
}

export const DEFAULT_SCALE: ScaleConfig = {
  gateways: 3,
  workers: 1,
  primaries: 3,
  identities: 1000,
  writesPerSec: 10_000,
  zipf: 1,
  hotShare: 0.02,
  churnPerSec: 0.1,
  limit: 200,
  windowSec: 1,
  durationSec: 3,
  leases: true,
  failover: false,
  failoverPauseMs: 250,
  failoverLostMs: 100,
  migration: false,
  migrationMs: 500,
  serviceRatePerSec: 150_000,
  hop: 'datacenter',
  timeoutMs: 250,
  retryStoreAfterMs: 250,
  maxTrackedClients: 100_000,
  tickMs: 0.05,
  seed: 1,
};

export function hopOf(cfg: ScaleConfig): HopLatency {
  const hop = cfg.hop === 'loopback' ? LOOPBACK_HOP : DATACENTER_HOP;
  return cfg.measuredRoundTripsMs ? { ...hop, roundTripsMs: cfg.measuredRoundTripsMs } : hop;
}

/** The quota settings every simulated gateway runs with, through the real schema. */
export function quotaSettings(cfg: ScaleConfig): GatewayConfig['quotas'] {
  return GatewayConfigSchema.parse({
    admin: { token: 'a-simulated-gateway-token' },
    upstreams: [{ id: 'relay-a', url: 'http://127.0.0.1:1' }],
    quotas: {
      gateways: cfg.gatewaysSetting ?? cfg.gateways,
      ...(cfg.keyPrefix ? { keyPrefix: cfg.keyPrefix } : {}),
      retryStoreAfterMs: cfg.retryStoreAfterMs,
      lease: { enabled: cfg.leases },
      tiers: { default: { write: { points: cfg.limit, windowSec: cfg.windowSec } } },
    },
  }).quotas;
}
