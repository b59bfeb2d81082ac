import { createHash } from 'node:crypto';
import type {
  GatewayConfig,
  IdentitySource,
  Limit,
  QuotaClass,
  QuotaMode,
  Tier,
} from '../config/schema.js';
import type { ClientKey } from '../store/keys.js';
import { identityKeys } from './identity-keys.js';
import type { PubkeyTierMap } from './pubkey-tiers.js';

type QuotaSettings = GatewayConfig['quotas'];

/** A request's class and cost, from the configured routes or the method. */
export interface Classification {
  cls: QuotaClass;
  cost: number;
}

const READ_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** Answered 404 by the gateway: nothing forwarded, nothing charged. */
const DENY: Classification = { cls: 'deny', cost: 0 };

/** Whole segments only: "/bulk" covers "/bulk" and "/bulk/x", not "/bulkier". */
function underPrefix(path: string, prefix: string): boolean {
  const withSlash = prefix.endsWith('/') ? prefix : `${prefix}/`;
  return path === prefix || path.startsWith(withSlash);
}

function deniedPrefixes(paths: readonly string[]): string[] {
  // "/admin/" denies "/admin" too: a deny list errs on the side of denying.
  return paths.map((p) => p.toLowerCase().replace(/(.)\/+$/, '$1'));
}

/**
 * Tiers, API keys, pubkey tiers, routes and the allow-list. Mutable at runtime (admin endpoint, SIGHUP),
 * so callers read it per request and never cache its answers.
 */
export class Policy {
  private tiers: Record<string, Tier>;
  private settings: QuotaSettings;
  private allow: Set<string>;
  /** quotas.denyPaths, lower-cased and without trailing slashes. */
  private denied: string[];
  /** quotas.mode, or what the admin endpoint set since. */
  private globalMode: QuotaMode;
  /** identity.pubkeyTiers as read from its files: pubkey (lowercase hex) -> tier. */
  private pubkeys: PubkeyTierMap = new Map();

  constructor(settings: QuotaSettings) {
    this.settings = settings;
    this.tiers = structuredClone(settings.tiers);
    this.allow = new Set(settings.allowList);
    this.denied = deniedPrefixes(settings.denyPaths);
    this.globalMode = settings.mode;
  }

  /** Replace everything from a reloaded configuration. */
  reload(settings: QuotaSettings): void {
    this.settings = settings;
    this.tiers = structuredClone(settings.tiers);
    this.allow = new Set(settings.allowList);
    this.denied = deniedPrefixes(settings.denyPaths);
    this.globalMode = settings.mode;
  }

  /**
   * `path` is the request's path as the relay will read it (`parseRequestTarget(raw).path`:
   * percent-decoded, dot segments resolved, slashes collapsed, no query), so no spelling
   * reaches a route other than the one judged here. Denied paths come first, then the first
   * route that matches, then the method. Deny matches whatever the case (a relay may route
   * without regard to it); other routes match the path as written.
   */
  classify(method: string, path: string): Classification {
    const upper = method.toUpperCase();
    const lower = path.toLowerCase();
    if (this.denied.some((prefix) => underPrefix(lower, prefix))) return DENY;
    for (const route of this.settings.routes) {
      const matchesPath =
        route.class === 'deny'
          ? underPrefix(lower, route.path.toLowerCase())
          : underPrefix(path, route.path);
      if (matchesPath && (!route.method || route.method === upper)) {
        return route.class === 'deny' ? DENY : { cls: route.class, cost: route.cost };
      }
    }
    return { cls: READ_METHODS.has(upper) ? 'read' : 'write', cost: 1 };
  }

  /** The tier of an API key, or undefined for an unknown key (which then identifies nobody). */
  tierOfApiKey(apiKey: string): string | undefined {
    const keys = this.settings.apiKeys;
    const direct = Object.hasOwn(keys, apiKey) ? keys[apiKey] : undefined;
    return direct ?? keys[`sha256:${createHash('sha256').update(apiKey).digest('hex')}`];
  }

  /** Replace the pubkey tiers (read at start and on SIGHUP from identity.pubkeyTiers). */
  setPubkeyTiers(pubkeys: PubkeyTierMap): void {
    this.pubkeys = pubkeys;
  }

  /** The tier a pubkey (lowercase hex, as events carry it) is listed in, if any. */
  tierOfPubkey(pubkey: string): string | undefined {
    const tier = this.pubkeys.get(pubkey);
    return tier !== undefined && Object.hasOwn(this.tiers, tier) ? tier : undefined;
  }

  /**
   * Whether a pubkey is listed in a tier that lifts the address quota (chargeAddress false):
   * once the gateway checked a signature of that key, its writes do not pay the address.
   */
  liftsAddress(pubkey: string): boolean {
    const tier = this.tierOfPubkey(pubkey);
    return tier !== undefined && this.tiers[tier]!.chargeAddress === false;
  }

  /** Pubkeys listed in identity.pubkeyTiers. */
  get listedPubkeys(): number {
    return this.pubkeys.size;
  }

  get defaultTier(): string {
    return this.settings.defaultTier;
  }

  isAllowListed(values: readonly string[]): boolean {
    return values.some((v) => this.allow.has(v));
  }

  /** The base limit of a tier for a class; undefined when the class is free in that tier. */
  limitOf(tier: string, cls: QuotaClass): Limit | undefined {
    if (cls === 'exempt' || cls === 'deny') return undefined;
    const t = this.tiers[tier] ?? this.tiers[this.settings.defaultTier]!;
    return cls === 'write' ? t.write : t.read;
  }

  /** The mode of every tier that sets none of its own. */
  get mode(): QuotaMode {
    return this.globalMode;
  }

  /** Whether over-limit requests of a tier are refused (enforce) or only reported (shadow). */
  modeOf(tier: string): QuotaMode {
    const t = this.tiers[tier] ?? this.tiers[this.settings.defaultTier];
    return t?.mode ?? this.globalMode;
  }

  /** Change the global mode at runtime (not persisted). */
  setMode(mode: QuotaMode): void {
    this.globalMode = mode;
  }

  /** Give a tier a mode of its own at runtime (not persisted); undefined: follow the global one. */
  setTierMode(tier: string, mode: QuotaMode | undefined): void {
    const t = this.tiers[tier];
    if (!t) throw new RangeError(`unknown tier "${tier}"`);
    if (mode) t.mode = mode;
    else delete t.mode;
  }

  tierNames(): string[] {
    return Object.keys(this.tiers);
  }

  snapshot(): Record<string, Tier> {
    return structuredClone(this.tiers);
  }

  /** Change a tier's base limit at runtime (not persisted). */
  setLimit(tier: string, cls: 'write' | 'read', limit: Limit | undefined): void {
    const t = this.tiers[tier];
    if (!t) throw new RangeError(`unknown tier "${tier}"`);
    if (cls === 'write') {
      if (!limit) throw new RangeError('a tier always has a write limit');
      t.write = limit;
    } else {
      t.read = limit;
    }
  }
}

export interface Identity {
  source: IdentitySource;
  /** "ip:…", "pk:…" or "key:…": never logged or stored as is. */
  value: string;
  /** The identity without its prefix, as the allow-list names it. */
  raw: string;
  tier: string;
  /** The salted hash of `value`: the only form that reaches Valkey or routing. */
  key: ClientKey;
}

/**
 * An authenticated pubkey (`auth`) has its own counters, apart from the same pubkey as an
 * author: a connection's writes are charged to their sender and to their author, and one
 * pubkey being both must not pay twice from one counter.
 */
const PREFIX: Record<IdentitySource, string> = {
  ip: 'ip',
  pubkey: 'pk',
  auth: 'auth',
  apiKey: 'key',
};

/** The source an identity prefix ("pk") stands for, as in "pk:<hex>"; undefined if none. */
export function sourceOfPrefix(prefix: string): IdentitySource | undefined {
  return (Object.keys(PREFIX) as IdentitySource[]).find((source) => PREFIX[source] === prefix);
}

/**
 * An identity with its key hashed once, for routing and for the quota counter alike; the hash
 * of an identity seen lately comes from the process's bounded cache (identity-keys.ts).
 */
export function makeIdentity(
  source: IdentitySource,
  raw: string,
  tier: string,
  salt: string,
): Identity {
  const value = `${PREFIX[source]}:${raw}`;
  return { source, value, raw, tier, key: identityKeys().keyOf(value, salt) };
}

export interface IdentityCandidates {
  apiKey?: string;
  /** Only a pubkey whose event signature was verified. */
  verifiedPubkey?: string;
  /** Only a pubkey this connection authenticated as (NIP-42, checked by the gateway). */
  authPubkey?: string;
  ip: string;
}

/** The first identity in the configured order that the request can prove. */
export function resolveIdentity(
  candidates: IdentityCandidates,
  order: readonly IdentitySource[],
  policy: Policy,
  salt: string,
): Identity {
  for (const source of order) {
    if (source === 'apiKey' && candidates.apiKey) {
      const tier = policy.tierOfApiKey(candidates.apiKey);
      if (tier) return makeIdentity(source, candidates.apiKey, tier, salt);
    } else if (source === 'pubkey' && candidates.verifiedPubkey) {
      return pubkeyIdentity(source, candidates.verifiedPubkey, policy, salt);
    } else if (source === 'auth' && candidates.authPubkey) {
      return pubkeyIdentity(source, candidates.authPubkey, policy, salt);
    } else if (source === 'ip') {
      break;
    }
  }
  // The IP is always known: it is the identity of last resort even when not in the order.
  return makeIdentity('ip', candidates.ip, policy.defaultTier, salt);
}

/** A verified (`pubkey`) or authenticated (`auth`) key, in its listed tier or the default. */
export function pubkeyIdentity(
  source: 'pubkey' | 'auth',
  pubkey: string,
  policy: Policy,
  salt: string,
): Identity {
  return makeIdentity(source, pubkey, policy.tierOfPubkey(pubkey) ?? policy.defaultTier, salt);
}
