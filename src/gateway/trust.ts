/** nostr.trust wired to the policy: each set the follow graph yields is swapped into it. */
import type { FastifyBaseLogger } from 'fastify';
import type { GatewayConfig } from '../config/schema.js';
import type { Policy } from '../quota/policy.js';
import type { GatewayMetrics } from './metrics.js';
import { TrustGraph } from '../trust/trust-graph.js';

/** The relay the follow lists are read from: nostr.trust.relay, else the first upstream. */
export function trustRelayUrl(config: GatewayConfig): string {
  return config.nostr.trust?.relay ?? config.upstreams[0]!.url.replace(/^http/, 'ws');
}

/** Start reading the follow graph (first refresh at once), or nothing without nostr.trust. */
export function startTrustGraph(
  config: GatewayConfig,
  policy: Policy,
  metrics: GatewayMetrics,
  log: FastifyBaseLogger,
): TrustGraph | undefined {
  const settings = config.nostr.trust;
  if (settings === undefined) return undefined;
  const graph = new TrustGraph(settings, {
    url: trustRelayUrl(config),
    swapped: (set) => policy.setTrusted({ tier: settings.tier, set }),
    report: (r) => {
      metrics.trustRefreshes.inc({ outcome: r.ok ? 'ok' : 'failed' });
      metrics.trustPubkeys.set(r.pubkeys);
      if (r.ok)
        log.info({ trust: r }, `nostr.trust: ${r.pubkeys} pubkeys in tier ${settings.tier}`);
      else
        log.warn({ trust: r }, `nostr.trust: refresh failed (${r.error}); the set in force stays`);
    },
  });
  graph.start();
  return graph;
}
