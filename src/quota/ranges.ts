/**
 * Nested address ranges (quotas.ranges): the networks holding a client, each a counter of its
 * own under a tier of its own ("range:ipv6/56"), so that the decider counts, leases, blocks and
 * insures a range exactly as it does a client. A range's key is the salted hash of its network
 * ("ip:2001:db8:1::/48"), one slot per range in a cluster, like any identity.
 */
import { RANGE_TIER_PREFIX } from '../config/schema.js';
import type { Limit, Ranges } from '../config/schema.js';
import { enclosingNetwork } from '../util/ip-network.js';

type Family = 'ipv4' | 'ipv6';

/** One configured range: its tier name, family, prefix and write limit. */
export interface RangeRule {
  tier: string;
  family: Family;
  prefixLength: number;
  write: Limit;
}

/** The tier a range is counted under: "range:ipv6/56". */
export function rangeTier(family: Family, prefixLength: number): string {
  return `${RANGE_TIER_PREFIX}${family}/${prefixLength}`;
}

/** The configured ranges, narrowest first (none while quotas.ranges is off). */
export function rangeRules(ranges: Ranges): RangeRule[] {
  if (!ranges.enabled) return [];
  return (['ipv6', 'ipv4'] as const).flatMap((family) =>
    [...ranges[family]]
      .sort((a, b) => b.prefixLength - a.prefixLength)
      .map((r) => ({ ...r, family, tier: rangeTier(family, r.prefixLength) })),
  );
}

/** A network holding a client, and the tier its counter is kept under. */
export interface ClientRange {
  tier: string;
  network: string;
}

/**
 * The ranges holding a client (as ClientAddress.ip spells it), narrowest first: none for a
 * client of no family configured, or that is no address.
 */
export function rangesOf(client: string, rules: readonly RangeRule[]): ClientRange[] {
  const out: ClientRange[] = [];
  for (const rule of rules) {
    const network = enclosingNetwork(client, rule.family, rule.prefixLength);
    if (network !== undefined) out.push({ tier: rule.tier, network });
  }
  return out;
}
