/** The gateway configuration a benchmark run uses: everything explicit, request logging off. */
import type { NodeAddress } from '../../store/options.js';
import type { RunConfig } from './config.js';
import { AT_LIMIT, AT_LIMIT_SENDER_KEY, leases, workloadOf, workloadSpec } from './config.js';
import { apiKeyOf, isFlooder } from './keys.js';

export const BENCH_ADMIN_TOKEN = 'bench-admin-token-0123456789';
/** Equal for every client and written into each result (the public benchmark left defaults). */
export const BENCH_VALKEY_TIMEOUTS = { connectTimeoutMs: 5000, commandTimeoutMs: 1000 };
export const BENCH_INFLIGHT_LIMIT = 1000;

export function benchGatewayConfig(
  cfg: RunConfig,
  valkey: NodeAddress,
  relayUrl: string,
  maxBodyBytes: number,
) {
  // The workload's own settings: whom it charges, and tiers by API key (flood).
  const spec = workloadSpec(workloadOf(cfg));
  const apiKeys = spec.floodTiers
    ? Object.fromEntries(
        Array.from({ length: cfg.keys }, (_, i) => [
          apiKeyOf(i),
          isFlooder(i, cfg.keys, cfg.floodShare ?? 0) ? 'flood' : 'default',
        ]),
      )
    : spec.atLimit
      ? { [AT_LIMIT_SENDER_KEY]: 'sender' }
      : {};
  return {
    listen: { host: '127.0.0.1', port: 0 },
    admin: { host: '127.0.0.1', port: 0, token: BENCH_ADMIN_TOKEN },
    valkey: {
      client: cfg.client ?? 'ioredis',
      mode: cfg.mode,
      nodes: [`${valkey.host}:${valkey.port}`],
      ...BENCH_VALKEY_TIMEOUTS,
      inflightLimit: BENCH_INFLIGHT_LIMIT,
    },
    upstreams: [{ id: 'relay-a', url: relayUrl }],
    // A third-party relay has no /healthz: its root answers a plain GET with 200.
    ...(cfg.relayImpl && cfg.relayImpl !== 'reference' ? { healthCheck: { path: '/' } } : {}),
    // The load generator is the only peer; it names its clients in X-Forwarded-For.
    trustedProxies: ['127.0.0.1'],
    logging: { level: 'warn', requests: false },
    // One gateway process unless the run asks for more (--workers).
    workers: cfg.workers ?? 1,
    // One load generator is one source address: its frame rate is what is being measured.
    limits: {
      maxBodyBytes,
      framesPerSecPerAddress: 1_000_000,
      ...(cfg.maxTrackedClients ? { maxTrackedClients: cfg.maxTrackedClients } : {}),
    },
    ...(spec.nostrVerify ? { nostr: { verify: spec.nostrVerify } } : {}),
    // Nostr: the sender's address, then the verified author (with the seen-ids check that
    // answers a replay itself), as the default configuration does.
    identity: { order: [...spec.identity] },
    quotas: {
      enabled: cfg.implementation !== 'quotas-off',
      // A fresh counter space per run: runs never inherit each other's consumption.
      keyPrefix: `bench-${Date.now().toString(36)}-${cfg.run}`,
      inMemoryBlock: cfg.inMemoryBlock,
      tiers: {
        // nostr-at-limit: authors (the default tier) at AT_LIMIT, the sender at the run's quota.
        default: { write: spec.atLimit ? AT_LIMIT : cfg.quota },
        ...(spec.atLimit ? { sender: { write: cfg.quota } } : {}),
        // One write an hour: the harness spends it before the warm-up (see exhaustFlooders),
        // so every flooder is over its limit for the whole run.
        flood: { write: { points: 1, windowSec: 3600 } },
      },
      apiKeys,
      lease: { enabled: leases(cfg.implementation) },
      ...(cfg.ranges ? { ranges: benchRanges(cfg.quota) } : {}),
    },
  };
}

/**
 * --ranges: every range on, each as wide in limit as 256 of its clients (a /24 holds 256
 * addresses), so that none refuses and a run measures only what charging them costs.
 */
function benchRanges(quota: { points: number; windowSec: number }) {
  const wide = (prefixLength: number, clients: number) => ({
    prefixLength,
    write: { points: quota.points * clients, windowSec: quota.windowSec },
  });
  return { enabled: true, ipv4: [wide(24, 256)], ipv6: [wide(56, 256), wide(48, 65_536)] };
}
