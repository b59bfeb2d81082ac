import { createHash } from 'node:crypto';
import { Lru } from '../util/lru.js';
import { DEFAULT_MAX_TRACKED_CLIENTS } from '../config/schema.js';
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
import { rangeRules, rangesOf } from './ranges.js';
import type { ClientRange, RangeRule } from './ranges.js';

type QuotaSettings = GatewayConfig['quotas'];

/** A request's class and cost, from the configured routes or the method. */
export interface Classification {
  cls: QuotaClass;
  cost: number;
}

const NO_RANGES: ClientRange[] = [];
const NO_IDENTITIES: Identity[] = [];

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

/** Everything a policy answers from: replaced whole by a change, never changed in place. */
interface PolicyState {
  readonly settings: QuotaSettings;
  readonly tiers: Readonly<Record<string, Readonly<Tier>>>;
  readonly allow: ReadonlySet<string>;
  /** quotas.denyPaths, lower-cased and without trailing slashes. */
  readonly denied: readonly string[];
  /** quotas.mode, or what the admin endpoint set since. */
  readonly globalMode: QuotaMode;
  /** identity.pubkeyTiers as read from its files: pubkey (lowercase hex) -> tier. */
  readonly pubkeys: PubkeyTierMap;
  /** nostr.trust: the pubkeys the follow graph reaches, and their tier (trust/trust-graph.ts). */
  readonly trusted: TrustedPubkeys | undefined;
  /** quotas.ranges, narrowest first (none while off). */
  readonly ranges: readonly RangeRule[];
  /** Each range's write limit by its tier name ("range:ipv6/56"). */
  readonly rangeLimits: ReadonlyMap<string, Limit>;
  /** The range identities of clients seen lately (rangeIdentities), made under one salt. */
  readonly rangeIds: { salt: string; byClient: Lru<string, Identity[]> };
}

/** A set of pubkeys (lowercase hex) given one tier. */
export interface TrustedPubkeys {
  readonly tier: string;
  readonly set: { has(pubkey: string): boolean; readonly size: number };
}

function stateOf(
  settings: QuotaSettings,
  pubkeys: PubkeyTierMap,
  trusted?: TrustedPubkeys,
  maxTrackedClients = DEFAULT_MAX_TRACKED_CLIENTS,
): PolicyState {
  const ranges = rangeRules(settings.ranges);
  return {
    settings,
    tiers: structuredClone(settings.tiers),
    allow: new Set(settings.allowList),
    denied: deniedPrefixes(settings.denyPaths),
    globalMode: settings.mode,
    pubkeys,
    trusted,
    ranges,
    rangeLimits: new Map(ranges.map((r) => [r.tier, r.write])),
    rangeIds: { salt: '', byClient: new Lru({ max: maxTrackedClients }) },
  };
}

/**
 * Tiers, API keys, pubkey tiers, routes and the allow-list. Changed at runtime (admin endpoint,
 * SIGHUP) by replacing its state whole: `pin()` gives a request a policy that answers as this
 * one does now for as long as the request lasts, whatever changes meanwhile.
 */
export class Policy {
  private state: PolicyState;
  private readonly pinned: boolean;

  constructor(settings: QuotaSettings, pinnedState?: PolicyState) {
    this.state = pinnedState ?? stateOf(settings, new Map());
    this.pinned = pinnedState !== undefined;
  }

  /** A policy fixed at this one's state now: what one request reads, between all its awaits. */
  pin(): Policy {
    return this.pinned ? this : new Policy(this.state.settings, this.state);
  }

  private change(next: Partial<PolicyState>): void {
    if (this.pinned) throw new Error('a pinned policy does not change');
    this.state = { ...this.state, ...next };
  }

  /** A copy of one tier with `edit` applied, in a copy of the tiers (others shared). */
  private changeTier(tier: string, edit: (t: Tier) => void): void {
    const t = this.state.tiers[tier];
    if (!t) throw new RangeError(`unknown tier "${tier}"`);
    const copy = { ...t };
    edit(copy);
    this.change({ tiers: { ...this.state.tiers, [tier]: copy } });
  }

  /**
   * Replace everything from a reloaded configuration (the pubkey tiers, the trusted set and
   * the bound of the range identities held are kept).
   */
  reload(settings: QuotaSettings): void {
    const { pubkeys, trusted, rangeIds } = this.state;
    this.change(stateOf(settings, pubkeys, trusted, rangeIds.byClient.max));
  }

  /**
   * Bound the range identities held (limits.maxTrackedClients), as boundIdentityKeys bounds
   * the identity hashes: emptied when the bound changes.
   */
  boundTrackedClients(max: number): void {
    if (this.state.rangeIds.byClient.max === max) return;
    this.change({ rangeIds: { salt: '', byClient: new Lru({ max }) } });
  }

  /** Clients whose range identities are held now (at most limits.maxTrackedClients). */
  get rangeIdentitiesHeld(): number {
    return this.state.rangeIds.byClient.size;
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
    const { denied, settings } = this.state;
    if (denied.some((prefix) => underPrefix(lower, prefix))) return DENY;
    for (const route of settings.routes) {
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
    const keys = this.state.settings.apiKeys;
    const direct = Object.hasOwn(keys, apiKey) ? keys[apiKey] : undefined;
    return direct ?? keys[`sha256:${createHash('sha256').update(apiKey).digest('hex')}`];
  }

  /** Replace the pubkey tiers (read at start and on SIGHUP from identity.pubkeyTiers). */
  setPubkeyTiers(pubkeys: PubkeyTierMap): void {
    this.change({ pubkeys });
  }

  /** Replace the set of trusted pubkeys (each refresh of nostr.trust swaps in a whole set). */
  setTrusted(trusted: TrustedPubkeys | undefined): void {
    this.change({ trusted });
  }

  /**
   * The tier a pubkey (lowercase hex, as events carry it) is listed in, else the trust tier if
   * the follow graph reaches it, if any.
   */
  tierOfPubkey(pubkey: string): string | undefined {
    const { trusted } = this.state;
    const tier =
      this.state.pubkeys.get(pubkey) ?? (trusted?.set.has(pubkey) ? trusted.tier : undefined);
    return tier !== undefined && Object.hasOwn(this.state.tiers, tier) ? tier : undefined;
  }

  /** The tier a pubkey writes under: its listed or trust tier, else the default. */
  tierOfAuthor(pubkey: string): string {
    return this.tierOfPubkey(pubkey) ?? this.defaultTier;
  }

  /**
   * Whether a pubkey is listed in a tier that lifts the address quota (chargeAddress false):
   * once the gateway checked a signature of that key, its writes do not pay the address.
   */
  liftsAddress(pubkey: string): boolean {
    const tier = this.tierOfPubkey(pubkey);
    return tier !== undefined && this.state.tiers[tier]!.chargeAddress === false;
  }

  /** Pubkeys listed in identity.pubkeyTiers. */
  get listedPubkeys(): number {
    return this.state.pubkeys.size;
  }

  get defaultTier(): string {
    return this.state.settings.defaultTier;
  }

  isAllowListed(values: readonly string[]): boolean {
    return values.some((v) => this.state.allow.has(v));
  }

  /**
   * The base limit of a tier for a class; undefined when the class is free in that tier. A
   * range's tier has a write limit only (reads are not charged to ranges).
   */
  limitOf(tier: string, cls: QuotaClass): Limit | undefined {
    if (cls === 'exempt' || cls === 'deny') return undefined;
    const { tiers, settings, rangeLimits } = this.state;
    const range = rangeLimits.get(tier);
    if (range !== undefined) return cls === 'write' ? range : undefined;
    const t = tiers[tier] ?? tiers[settings.defaultTier]!;
    return cls === 'write' ? t.write : t.read;
  }

  /**
   * The identity's base limit of `cls` when its whole quota is less than `cost` (the most a
   * multiplier, at most 1, leaves), so no wait lets the request pass as sent. Undefined when
   * it could pass some day, or is not limited (quotas off, a free class, allow-listed with
   * `ip`, a tier in shadow mode).
   */
  quotaBelow(identity: Identity, cls: QuotaClass, cost: number, ip: string): Limit | undefined {
    if (!this.state.settings.enabled || cost <= 0) return undefined;
    const limit = this.limitOf(identity.tier, cls);
    if (limit === undefined || limit.points >= cost) return undefined;
    if (this.modeOf(identity.tier) === 'shadow') return undefined;
    if (this.isAllowListed([ip, identity.raw])) return undefined;
    return limit;
  }

  /** The networks holding a client that its writes pay too (quotas.ranges), narrowest first. */
  rangesOf(client: string): ClientRange[] {
    const { ranges } = this.state;
    return ranges.length === 0 ? NO_RANGES : rangesOf(client, ranges);
  }

  /**
   * The identities of the ranges holding a client (rangesOf), each under its range's tier:
   * worked out once per client seen lately, as they are charged on every write.
   */
  rangeIdentities(client: string, salt: string): Identity[] {
    if (this.state.ranges.length === 0) return NO_IDENTITIES;
    const cache = this.state.rangeIds;
    if (cache.salt !== salt) {
      cache.byClient.clear();
      cache.salt = salt;
    }
    let ids = cache.byClient.get(client);
    if (ids === undefined) {
      ids = this.rangesOf(client).map((r) => makeIdentity('ip', r.network, r.tier, salt));
      cache.byClient.set(client, ids);
    }
    return ids;
  }

  /** The mode of every tier that sets none of its own. */
  get mode(): QuotaMode {
    return this.state.globalMode;
  }

  /**
   * Whether over-limit requests of a tier are refused (enforce) or only reported (shadow). A
   * range's tier (no tier of quotas.tiers) follows the default tier.
   */
  modeOf(tier: string): QuotaMode {
    const { tiers, settings, globalMode } = this.state;
    const t = tiers[tier] ?? tiers[settings.defaultTier];
    return t?.mode ?? globalMode;
  }

  /** Change the global mode at runtime (not persisted). */
  setMode(mode: QuotaMode): void {
    this.change({ globalMode: mode });
  }

  /** Give a tier a mode of its own at runtime (not persisted); undefined: follow the global one. */
  setTierMode(tier: string, mode: QuotaMode | undefined): void {
    this.changeTier(tier, (t) => {
      if (mode) t.mode = mode;
      else delete t.mode;
    });
  }

  tierNames(): string[] {
    return Object.keys(this.state.tiers);
  }

  snapshot(): Record<string, Tier> {
    return structuredClone(this.state.tiers);
  }

  /** Change a tier's base limit at runtime (not persisted). */
  setLimit(tier: string, cls: 'write' | 'read', limit: Limit | undefined): void {
    if (!this.state.tiers[tier]) throw new RangeError(`unknown tier "${tier}"`);
    if (cls === 'write' && !limit) throw new RangeError('a tier always has a write limit');
    this.changeTier(tier, (t) => {
      if (cls === 'write') t.write = limit!;
      else t.read = limit;
    });
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
  return makeIdentity(source, pubkey, policy.tierOfAuthor(pubkey), salt);
}
