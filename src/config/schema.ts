import { z } from 'zod';
import { kindSpecProblem, overlappingRanges } from '../gateway/nostr-costs.js';
import { CLIENT_KINDS, TOPOLOGIES } from '../store/options.js';
import { DEFAULT_KEY_SALT, isPlaceholderAdminToken } from './secrets.js';

/*
 * Every object here is strict (z.strictObject): an unknown key, a typo or a setting of a
 * newer version, is an error that names it (see unknown-keys.ts), never silently dropped.
 * test/config.test.ts fails on an object that is not.
 */

const hostPort = z.string().regex(/^(?:.+:)?\d{1,5}$/, 'expected "host:port"');
const positiveInt = z.number().int().positive();

export const QUOTA_CLASSES = ['write', 'read', 'exempt', 'deny'] as const;
export type QuotaClass = (typeof QUOTA_CLASSES)[number];

const Limit = z.strictObject({
  points: z.number().int().min(0),
  windowSec: positiveInt,
});
export type Limit = z.infer<typeof Limit>;

/**
 * enforce: over a limit is refused. shadow: decisions are computed, counted
 * (outcome="shadow_limited"), logged (sampled) and sent in headers, and nothing is refused:
 * a dry run of a new quota on live traffic.
 */
export const QUOTA_MODES = ['enforce', 'shadow'] as const;
export type QuotaMode = (typeof QUOTA_MODES)[number];

const Tier = z.strictObject({
  write: Limit,
  /** Reads are free unless a tier gives them a limit. */
  read: Limit.optional(),
  /** This tier's mode; absent, the tier follows quotas.mode. */
  mode: z.enum(QUOTA_MODES).optional(),
});
export type Tier = z.infer<typeof Tier>;

/**
 * Paths of the reference relay's operator endpoints: answered 404 by the gateway, never
 * forwarded (the default of quotas.denyPaths).
 */
export const DEFAULT_DENY_PATHS = ['/admin', '/stats', '/metrics'];

/**
 * Clients each per-client structure holds in memory (limits.maxTrackedClients): the most
 * recently seen, which are the ones that matter. An entry costs about 0.1 KiB (a block or a
 * counter) to 0.25 KiB (an identity hash): a few MiB in all at this bound.
 */
export const DEFAULT_MAX_TRACKED_CLIENTS = 10_000;

const Route = z.strictObject({
  /**
   * Path prefix the route applies to ("/events" matches "/events" and "/events/x"), matched
   * against the path as the relay reads it (percent-decoded, dot segments resolved).
   */
  path: z.string().startsWith('/'),
  method: z
    .string()
    .transform((m) => m.toUpperCase())
    .optional(),
  class: z.enum(QUOTA_CLASSES),
  /** Points one request costs (not used by exempt and deny). */
  cost: positiveInt.default(1),
});
export type Route = z.infer<typeof Route>;

/**
 * A relay node's write budget: what the node can sustain, for every gateway together. Under
 * pressure (its multiplier m below 1) every write to the node also consumes points of this
 * budget scaled by m, from one counter in Valkey shared by all gateways, after the client's
 * own cap admitted it; at m = 1 it costs nothing.
 */
const WriteBudget = z
  .strictObject({
    points: positiveInt.describe(
      'Write points the node takes per window at multiplier 1, from all clients and gateways together',
    ),
    windowSec: positiveInt
      .default(1)
      .describe('The window of the budget, in seconds (default 1: points per second)'),
  })
  .describe(
    "The node's write budget: while its multiplier m is below 1, writes to it also consume " +
      'points x m per window from one counter shared by every gateway (after the per-client cap)',
  );
export type WriteBudget = z.infer<typeof WriteBudget>;

const Upstream = z.strictObject({
  /** The node id its pressure feed publishes under. */
  id: z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, 'letters, digits, _ . - (at most 64)'),
  url: z.url({ protocol: /^https?$/ }),
  writeBudget: WriteBudget.optional(),
});
export type Upstream = z.infer<typeof Upstream>;

/**
 * Where a client's identity comes from: a known API key, the verified author of an EVENT
 * (charged besides the sender), the pubkey a connection authenticated with NIP-42 AUTH
 * (`auth`), the address.
 */
export const IDENTITY_SOURCES = ['apiKey', 'pubkey', 'auth', 'ip'] as const;
export type IdentitySource = (typeof IDENTITY_SOURCES)[number];

/**
 * `nostr.verifySignatures` (boolean) is the older spelling of `nostr.verify`: true meant every
 * EVENT (`always`), false none (`never`). Both at once must agree.
 */
function deprecatedVerifySignatures(value: unknown, ctx: z.core.$RefinementCtx): unknown {
  if (typeof value !== 'object' || value === null || !('verifySignatures' in value)) return value;
  const { verifySignatures, ...rest } = value as Record<string, unknown>;
  if (typeof verifySignatures !== 'boolean') {
    ctx.addIssue({
      code: 'custom',
      path: ['verifySignatures'],
      message: 'expected true or false (deprecated: use verify: auto | always | never)',
    });
    return rest;
  }
  const mapped = verifySignatures ? 'always' : 'never';
  if ('verify' in rest && rest.verify !== mapped) {
    ctx.addIssue({
      code: 'custom',
      path: ['verifySignatures'],
      message: `contradicts verify: ${String(rest.verify)} (verifySignatures is the deprecated spelling; keep only verify)`,
    });
  }
  return { verify: mapped, ...rest };
}

/**
 * nostr.costs: write points per EVENT by kind, plus points per KiB of the EVENT message above
 * a free size. Single kinds win over a range that holds them; ranges must not overlap.
 */
const EventCosts = z
  .strictObject({
    /** "1": 1, "1984": 20, "30000-39999": 5 (inclusive); 0 admits without consuming. */
    kinds: z.record(z.string(), z.number().int().min(0)).default({}),
    /** Points of a kind not named in `kinds`. */
    default: z.number().int().min(0).default(1),
    /** Each KiB (started) of the EVENT message beyond `freeBytes` adds `points`. */
    perKiB: z
      .strictObject({ points: positiveInt, freeBytes: z.number().int().min(0).default(0) })
      .optional(),
  })
  .superRefine((costs, ctx) => {
    for (const spec of Object.keys(costs.kinds)) {
      const problem = kindSpecProblem(spec);
      if (problem) ctx.addIssue({ code: 'custom', path: ['kinds', spec], message: problem });
    }
    const overlap = overlappingRanges(Object.keys(costs.kinds));
    if (overlap) {
      ctx.addIssue({
        code: 'custom',
        path: ['kinds', overlap[1]],
        message: `overlaps "${overlap[0]}": ranges must not share a kind (a single kind may sit inside a range and wins over it)`,
      });
    }
  });

/** A kind (7) or an inclusive range of kinds ("1000-1999"). */
const KindSpec = z.union([z.number(), z.string()]).superRefine((spec, ctx) => {
  const problem = kindSpecProblem(spec);
  if (problem) ctx.addIssue({ code: 'custom', message: problem });
});

/** How the gateway spreads requests and new connections over the healthy relay nodes. */
export const ROUTING_MODES = ['sticky', 'round-robin', 'headroom'] as const;
export type RoutingMode = (typeof ROUTING_MODES)[number];

/**
 * pressure.drain: WebSockets pinned to a node in trouble (in emergency, or its multiplier
 * below `belowShareOfBest` x the best healthy node's) are moved a few at a time: a NOTICE,
 * then a close 1013 (try again later) once their forwarded EVENTs have their OK; the client
 * reconnects and headroom routing sends it elsewhere. Needs routing: headroom (a sticky
 * client would come back to the same node).
 */
const Drain = z
  .strictObject({
    enabled: z.boolean().default(false).describe('move connections off a node in trouble'),
    belowShareOfBest: z
      .number()
      .gt(0)
      .max(1)
      .default(0.5)
      .describe("a node is in trouble below this share of the best healthy node's multiplier"),
    sharePerSec: z
      .number()
      .gt(0)
      .max(1)
      .default(0.05)
      .describe("at most this share of a troubled node's connections is closed per second"),
    minPerSec: positiveInt
      .default(1)
      .describe('but at least this many per second (a node with few connections still drains)'),
    settleMs: positiveInt
      .default(5000)
      .describe('a chosen connection waits at most this long for the OKs of its EVENTs'),
  })
  .describe('gradual drain of WebSockets pinned to a node in trouble');

export const GatewayConfigSchema = z
  .strictObject({
    listen: z
      .strictObject({
        host: z.string().default('127.0.0.1'),
        port: z.number().int().min(0).max(65535).default(8080),
      })
      .prefault({}),
    admin: z.strictObject({
      host: z.string().default('127.0.0.1'),
      port: z.number().int().min(0).max(65535).default(8081),
      /** Bearer token for /admin/*; required (from the file, SLUICE_ADMIN_TOKEN or --admin-token). */
      token: z.string().min(16, 'the admin token must have at least 16 characters'),
    }),
    valkey: z
      .strictObject({
        client: z.enum(CLIENT_KINDS).default('valkey-glide'),
        mode: z.enum(TOPOLOGIES).default('standalone'),
        nodes: z.array(hostPort).min(1).default(['127.0.0.1:6379']),
        connectTimeoutMs: positiveInt.default(2000),
        commandTimeoutMs: positiveInt.default(250),
        inflightLimit: positiveInt.default(1000),
      })
      .prefault({}),
    upstreams: z.array(Upstream).min(1, 'at least one upstream relay node is required'),
    /**
     * sticky: a client's writes go to one node (by its hash); round-robin: spread them;
     * headroom: each HTTP request and each new WebSocket goes to the better of two random
     * healthy nodes by multiplier, never to one at 0 or in emergency while another can take it.
     */
    routing: z.enum(ROUTING_MODES).default('sticky'),
    healthCheck: z
      .strictObject({
        path: z.string().startsWith('/').default('/healthz'),
        intervalMs: positiveInt.default(2000),
        timeoutMs: positiveInt.default(1000),
        /** Consecutive failures before a node leaves rotation. */
        failuresToDown: positiveInt.default(2),
      })
      .prefault({}),
    /** Peers (IPs or CIDRs) whose X-Forwarded-For is believed. Nobody by default. */
    trustedProxies: z.array(z.string()).default([]),
    identity: z
      .strictObject({
        order: z.array(z.enum(IDENTITY_SOURCES)).min(1).default(['apiKey', 'pubkey', 'ip']),
        apiKeyHeader: z
          .string()
          .default('x-api-key')
          .transform((h) => h.toLowerCase()),
        /** Salt of the identity hash; every gateway sharing a quota must use the same one. */
        keySalt: z.string().min(1).default(DEFAULT_KEY_SALT),
        /**
         * Credential headers passed on to the relays (the API key header and Authorization are
         * removed otherwise), e.g. ["authorization"] for relays that check NIP-98 HTTP auth.
         */
        forwardCredentials: z.array(z.string().transform((h) => h.toLowerCase())).default([]),
        /** IPv6 clients are one client per network of this prefix (128: per address). */
        ipv6PrefixLength: z.number().int().min(1).max(128).default(64),
      })
      .prefault({}),
    quotas: z
      .strictObject({
        /** Off: a plain proxy (the benchmark's ceiling). */
        enabled: z.boolean().default(true),
        /** enforce, or shadow: count and report who would be limited, refuse nobody. */
        mode: z.enum(QUOTA_MODES).default('enforce'),
        headers: z
          .strictObject({
            /**
             * Also send X-RateLimit-Limit, -Remaining and -Reset (seconds from now), for
             * clients that read only those; RateLimit-Policy and RateLimit are always sent.
             */
            legacy: z.boolean().default(false),
          })
          .prefault({}),
        keyPrefix: z
          .string()
          .regex(/^[A-Za-z0-9:_-]+$/)
          .default('sluice'),
        tiers: z
          .record(z.string(), Tier)
          .default({ default: { write: { points: 600, windowSec: 60 } } }),
        defaultTier: z.string().default('default'),
        /** API key -> tier. A key may be given as "sha256:<hex>" to keep it out of the file. */
        apiKeys: z.record(z.string(), z.string()).default({}),
        routes: z.array(Route).default([]),
        /**
         * Path prefixes answered 404 and never forwarded, whatever the method and case; checked
         * before `routes`, so adding routes keeps them. [] forwards everything.
         */
        denyPaths: z.array(z.string().startsWith('/')).default(DEFAULT_DENY_PATHS),
        /** Identities (IP, pubkey hex or API key) that bypass quotas. */
        allowList: z.array(z.string()).default([]),
        /** Reject known over-limit clients from memory, without a Valkey round trip. */
        inMemoryBlock: z.boolean().default(true),
        /** Gateways sharing the quota: the insurance limiter enforces this gateway's share. */
        gateways: positiveInt.default(1),
        /** When Valkey fails: insure (in-memory share), open (admit), closed (503). */
        onStoreFailure: z.enum(['insure', 'open', 'closed']).default('insure'),
        /** After a store failure, skip Valkey for this long before trying it again. */
        retryStoreAfterMs: positiveInt.default(1000),
        /** Multipliers are quantised down to this step: one limiter per step. */
        multiplierStep: z.number().positive().max(1).default(0.05),
        /**
         * Quota leases: a gateway takes several points of a key's quota in one atomic round
         * trip (never past the effective limit) and spends them locally. Never over-admits;
         * points leased here and unspent are the cost (see README, "Quota leases").
         */
        lease: z
          .strictObject({
            enabled: z.boolean().default(false),
            /**
             * A key unused this long hands its unspent points back; a lease holds no more
             * than the key spends in half of it.
             */
            idleMs: positiveInt.default(10_000),
          })
          .prefault({}),
      })
      .prefault({}),
    /** Adaptive multipliers from the pressure feeds (off: every node stays at 1.0). */
    pressure: z
      .strictObject({
        enabled: z.boolean().default(false),
        /** Used at cold start and when a feed goes stale: neither 1 (unsafe) nor 0 (an outage). */
        safeMultiplier: z.number().gt(0).lt(1).default(0.5),
        /** No report for this long: the feed is stale (about three feed ticks). */
        staleAfterMs: positiveInt.default(1500),
        /** How long a stale feed's last value is held before moving to the safe value. */
        holdMs: positiveInt.default(2000),
        /** Reports needed after a gap before the feed is trusted again. */
        freshReportsToTrust: positiveInt.default(3),
        /** Fastest rise of a multiplier once trusted again, per second. */
        rampUpPerSec: z.number().positive().default(0.1),
        /** How often the board re-evaluates staleness. */
        evaluateMs: positiveInt.default(250),
        /** New connections and non-sticky writes avoid a node in emergency when others can take them. */
        avoidEmergency: z.boolean().default(false),
        drain: Drain.prefault({}),
      })
      .prefault({}),
    limits: z
      .strictObject({
        maxFrameBytes: positiveInt.default(128 * 1024),
        maxBodyBytes: positiveInt.default(1024 * 1024),
        /** Client frames waiting for a decision before the socket is paused. */
        maxQueuedFrames: positiveInt.default(64),
        /** WebSocket frames one source address may send per second, over all its connections. */
        framesPerSecPerAddress: positiveInt.default(1000),
        /** WebSocket connections (open or opening) one source address may hold; beyond: 429. */
        maxConnectionsPerAddress: positiveInt.default(256),
        /**
         * Clients held in memory by each per-client structure (identity hashes, in-memory
         * blocks and insurance counters per quota, frame rates per address); past it the least
         * recently seen is forgotten. Forgetting costs a hash or a Valkey round trip, never an
         * admission beyond a limit while Valkey answers.
         */
        maxTrackedClients: positiveInt.default(DEFAULT_MAX_TRACKED_CLIENTS),
        /**
         * Bytes waiting to be written to one client that does not read: past half of this (at
         * most 1 MiB) the gateway stops reading from it; past this it is closed (1008).
         */
        maxBufferedBytesPerClient: positiveInt.default(4 * 1024 * 1024),
        /** A client's request headers must all arrive within this (slow headers: 408, closed). */
        headersTimeoutMs: positiveInt.default(10_000),
        /** A client's whole request, body included, must arrive within this (else 408, closed). */
        requestTimeoutMs: positiveInt.default(30_000),
        /** An idle keep-alive connection is closed after this. */
        keepAliveTimeoutMs: positiveInt.default(5_000),
        /** A relay must connect and start answering (and keep its body flowing) within this. */
        upstreamTimeoutMs: positiveInt.default(30_000),
      })
      .refine((l) => l.headersTimeoutMs <= l.requestTimeoutMs, {
        path: ['headersTimeoutMs'],
        message: 'must not exceed requestTimeoutMs (the headers are part of the request)',
      })
      .prefault({}),
    nostr: z
      .preprocess(
        deprecatedVerifySignatures,
        z.strictObject({
          /**
           * Who checks EVENT signatures: `auto`, the gateway, only where something needs the
           * author (the pubkey identity, with quotas on), before the relay sees the event;
           * `always`, the gateway, every EVENT (the relay then never sees a forgery); `relay`,
           * the relay alone: the author is charged when the relay accepts the event (its `OK`
           * true proves the signature), and refused beforehand once known over its limit, so
           * an author may overrun its quota by the events it has in flight; `never` (refused
           * with the pubkey identity).
           */
          verify: z.enum(['auto', 'always', 'relay', 'never']).default('auto'),
          /** EVENTs failing verification on one connection before it is closed (1008). */
          maxInvalidEvents: positiveInt.default(10),
          /** Write points per EVENT by kind and size (HTTP routes keep their own `cost`). */
          costs: EventCosts.prefault({}),
          /**
           * Paths where a POST carries one Nostr event (the reference relay's HTTP write):
           * judged by the same event policy as a WebSocket EVENT (kinds, proof of work, costs,
           * the author's quota) instead of by its route. [] judges them as any HTTP write.
           */
          httpEventPaths: z
            .array(z.string().startsWith('/'))
            .default(['/events'])
            .describe('POST paths whose body is one Nostr event, judged as a WebSocket EVENT'),
          /** Kinds answered `blocked:` and never forwarded, e.g. [4, "1000-1999"]. */
          blockedKinds: z.array(KindSpec).default([]),
          /**
           * The URL clients use for this gateway (ws:// or wss://): an AUTH event's relay tag
           * must name it. Needed by the `auth` identity and authRequiredForWrites.
           */
          publicUrl: z.url({ protocol: /^wss?$/ }).optional(),
          /** EVENTs from connections that have not authenticated (NIP-42) get auth-required:. */
          authRequiredForWrites: z.boolean().default(false),
          /** Open subscriptions (REQ ids) per connection; a REQ beyond: CLOSED restricted:. */
          maxSubscriptions: positiveInt.optional(),
          /** Filters in one REQ or COUNT; beyond: CLOSED restricted:. */
          maxFiltersPerReq: positiveInt.optional(),
          /** NIP-13 proof of work on event ids (the `nonce` tag's committed target caps it). */
          pow: z
            .strictObject({
              /** Events credited with fewer leading zero bits are refused `pow:` (0: none). */
              minDifficulty: z.number().int().min(0).max(256).default(0),
              /** Each whole `perBits` above minDifficulty multiplies the cost by `factor`. */
              discount: z
                .strictObject({
                  perBits: z.number().int().min(1).max(256),
                  factor: z.number().gt(0).lt(1),
                })
                .optional(),
            })
            .prefault({}),
        }),
      )
      .prefault({}),
    logging: z
      .strictObject({
        level: z
          .enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'])
          .default('info'),
        requests: z.boolean().default(false),
      })
      .prefault({}),
    shutdownGraceMs: positiveInt.default(10_000),
    /**
     * Gateway processes sharing the listening port (node:cluster): `auto` is one per core.
     * With more than one, a primary holds the admin listener and forwards to the workers.
     */
    workers: z.union([z.literal('auto'), positiveInt.max(64)]).default('auto'),
  })
  .superRefine((cfg, ctx) => {
    if (isPlaceholderAdminToken(cfg.admin.token)) {
      ctx.addIssue({
        code: 'custom',
        path: ['admin', 'token'],
        message:
          'is the placeholder shipped in the example configuration, known to anyone: set a ' +
          'secret of your own (SLUICE_ADMIN_TOKEN, --admin-token or admin.token; e.g. ' +
          '`openssl rand -hex 32`)',
      });
    }
    if (!cfg.quotas.tiers[cfg.quotas.defaultTier]) {
      ctx.addIssue({
        code: 'custom',
        path: ['quotas', 'defaultTier'],
        message: `names a tier that is not defined (tiers: ${Object.keys(cfg.quotas.tiers).join(', ')})`,
      });
    }
    for (const [key, tier] of Object.entries(cfg.quotas.apiKeys)) {
      if (!cfg.quotas.tiers[tier]) {
        ctx.addIssue({
          code: 'custom',
          path: ['quotas', 'apiKeys', key],
          message: `tier "${tier}" is not defined`,
        });
      }
    }
    const ids = cfg.upstreams.map((u) => u.id);
    const dup = ids.find((id, i) => ids.indexOf(id) !== i);
    if (dup)
      ctx.addIssue({
        code: 'custom',
        path: ['upstreams'],
        message: `node id "${dup}" appears twice`,
      });
    if (cfg.pressure.drain.enabled && cfg.routing !== 'headroom') {
      ctx.addIssue({
        code: 'custom',
        path: ['pressure', 'drain', 'enabled'],
        message: `needs routing: headroom (with ${cfg.routing} routing a drained client would reconnect to the same node)`,
      });
    }
    const needsAuth = cfg.identity.order.includes('auth') || cfg.nostr.authRequiredForWrites;
    if (needsAuth && cfg.nostr.publicUrl === undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['nostr', 'publicUrl'],
        message:
          'is required by NIP-42 AUTH (the auth identity or authRequiredForWrites): the ws:// or wss:// URL clients use, which their AUTH events name',
      });
    }
    if (cfg.identity.order.includes('pubkey') && cfg.nostr.verify === 'never') {
      ctx.addIssue({
        code: 'custom',
        path: ['identity', 'order'],
        message:
          "the pubkey identity needs signatures verified (nostr.verify auto, always or relay; else a client could drain another's quota)",
      });
    }
  });

export type GatewayConfigInput = z.input<typeof GatewayConfigSchema>;
export type GatewayConfig = z.output<typeof GatewayConfigSchema>;
