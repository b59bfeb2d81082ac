import { z } from 'zod';
import { kindSpecProblem, overlappingRanges } from '../nostr/costs.js';
import { CLIENT_KINDS, DEFAULT_CLIENT, TOPOLOGIES } from '../store/options.js';
import { DEFAULT_KEY_SALT, isPlaceholderAdminToken } from './secrets.js';
import { TrustSettingsSchema } from './trust-schema.js';

/*
 * Every object here is strict (z.strictObject): an unknown key, a typo or a setting of a
 * newer version, is an error that names it (see unknown-keys.ts), never silently dropped.
 * test/unit/config/config.test.ts fails on an object that is not.
 */

const hostPort = z.string().regex(/^(?:.+:)?\d{1,5}$/, 'expected "host:port"');
const positiveInt = z.number().int().positive();

export const QUOTA_CLASSES = ['write', 'read', 'exempt', 'deny'] as const;
export type QuotaClass = (typeof QUOTA_CLASSES)[number];

const Limit = z.strictObject({
  points: z
    .number()
    .int()
    .min(0)
    .describe(
      'Points allowed per window (a request or EVENT costs its route or event cost; 0 refuses all)',
    ),
  windowSec: positiveInt.describe('The window, in seconds'),
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
  write: Limit.describe("The tier's write quota per client"),
  read: Limit.optional().describe('A read quota; absent, reads are free'),
  mode: z
    .enum(QUOTA_MODES)
    .optional()
    .describe("This tier's mode (enforce or shadow); absent, the tier follows quotas.mode"),
  chargeAddress: z
    .boolean()
    .optional()
    .describe(
      'Whether the writes of a pubkey listed in this tier (identity.pubkeyTiers) also pay the ' +
        "address's quota (unset: true, they do); false lifts it once the gateway checked the key's " +
        'signature (paid and invite-only relays, docs/NOSTR.md "Pubkey tiers")',
    ),
});
export type Tier = z.infer<typeof Tier>;

/** One nested range's write limit: every write of a client inside it pays it too. */
const RangeLimit = z.strictObject({
  prefixLength: z
    .number()
    .int()
    .min(1)
    .max(127)
    .describe('The range: the network of this many leading bits holding the client'),
  write: Limit.describe("The range's write quota, shared by every client inside it"),
});
export type RangeLimit = z.infer<typeof RangeLimit>;

/**
 * The default nested ranges: four clients' worth each (the default tier's 600 a minute), so
 * that an honest client alone in its /48 (or /24) meets its own limit first.
 */
export const DEFAULT_RANGES = {
  ipv6: [
    { prefixLength: 56, write: { points: 2400, windowSec: 60 } },
    { prefixLength: 48, write: { points: 4800, windowSec: 60 } },
  ],
  ipv4: [{ prefixLength: 24, write: { points: 2400, windowSec: 60 } }],
};

const Ranges = z
  .strictObject({
    enabled: z
      .boolean()
      .default(false)
      .describe(
        'Charge every write of an address-identified client to the networks holding it ' +
          'too (below), the tightest refusing: a flood rotating through the /64s of one ' +
          '/56 is held to the /56 (docs/NOSTR.md, "Address ranges")',
      ),
    ipv6: z
      .array(RangeLimit)
      .default(DEFAULT_RANGES.ipv6)
      .describe(
        'IPv6 ranges, each shorter than identity.ipv6PrefixLength (the client itself), ' +
          'e.g. [{prefixLength: 56, write: {points: 2400, windowSec: 60}}]',
      ),
    ipv4: z
      .array(RangeLimit)
      .default(DEFAULT_RANGES.ipv4)
      .describe('IPv4 ranges, each shorter than 32 (the address itself), e.g. the /24'),
  })
  .prefault({})
  .describe(
    'Nested address-range write limits, charged with the address (not for API keys, nor ' +
      "when a pubkey tier lifts the address); they follow the default tier's mode",
  );
export type Ranges = z.infer<typeof Ranges>;

/** Tier names taken by nested ranges ("range:ipv6/56"): no configured tier may use them. */
export const RANGE_TIER_PREFIX = 'range:';

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
  path: z
    .string()
    .startsWith('/')
    .describe(
      'Path prefix the route applies to ("/events" matches "/events" and "/events/x"), matched ' +
        'against the path as the relay reads it (percent-decoded, dot segments resolved)',
    ),
  method: z
    .string()
    .transform((m) => m.toUpperCase())
    .optional()
    .describe('HTTP method the route applies to (any case); absent, every method'),
  class: z
    .enum(QUOTA_CLASSES)
    .describe(
      'write or read: charged to that quota; exempt: free; deny: answered 404, never forwarded',
    ),
  cost: positiveInt.default(1).describe('Points one request costs (not used by exempt and deny)'),
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
      'points x m per window from one counter shared by every gateway (after the per-client cap). ' +
      "Optional with pressure on: the node's feed learns what it drains and publishes that as " +
      'its budget; set here, it caps the learned one (the smaller per second applies)',
  );
export type WriteBudget = z.infer<typeof WriteBudget>;

const Upstream = z.strictObject({
  id: z
    .string()
    .regex(/^[A-Za-z0-9_.-]{1,64}$/, 'letters, digits, _ . - (at most 64)')
    .describe('The node id its pressure feed publishes under (letters, digits, _ . -)'),
  url: z.url({ protocol: /^https?$/ }).describe('The relay node, http:// or https://'),
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

/** Single kinds win over a range that holds them; ranges must not overlap. */
const EventCosts = z
  .strictObject({
    kinds: z
      .record(z.string(), z.number().int().min(0))
      .default({})
      .describe(
        'Points per kind or inclusive range of kinds, e.g. {"1": 1, "1984": 20, "30000-39999": 5}; ' +
          'a single kind wins over a range that holds it; 0 admits without consuming',
      ),
    default: z.number().int().min(0).default(1).describe('Points of a kind not named in kinds'),
    perKiB: z
      .strictObject({
        points: positiveInt.describe('Points added per KiB (started) beyond freeBytes'),
        freeBytes: z
          .number()
          .int()
          .min(0)
          .default(0)
          .describe('Bytes of the EVENT message that cost nothing extra'),
      })
      .optional()
      .describe(
        'Size surcharge: each KiB (started) of the EVENT message beyond freeBytes adds points',
      ),
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

const port = z.number().int().min(0).max(65535);

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
    enabled: z.boolean().default(false).describe('Move connections off a node in trouble'),
    belowShareOfBest: z
      .number()
      .gt(0)
      .max(1)
      .default(0.5)
      .describe("A node is in trouble below this share of the best healthy node's multiplier"),
    sharePerSec: z
      .number()
      .gt(0)
      .max(1)
      .default(0.05)
      .describe("At most this share of a troubled node's connections is closed per second"),
    minPerSec: positiveInt
      .default(1)
      .describe('But at least this many per second (a node with few connections still drains)'),
    settleMs: positiveInt
      .default(5000)
      .describe('A chosen connection waits at most this long for the OKs of its EVENTs'),
  })
  .describe('Gradual drain of WebSockets pinned to a node in trouble');

export const GatewayConfigSchema = z
  .strictObject({
    listen: z
      .strictObject({
        host: z
          .string()
          .default('127.0.0.1')
          .describe('Address clients connect to (HTTP and WebSocket); 0.0.0.0 for all'),
        port: port.default(8080).describe('Port clients connect to (0 picks a free one)'),
      })
      .prefault({})
      .describe('The public listener'),
    admin: z
      .strictObject(
        {
          host: z
            .string()
            .default('127.0.0.1')
            .describe('Address of /admin/*, /metrics, /healthz and /readyz'),
          port: port.default(8081).describe('Port of the admin listener (0 picks a free one)'),
          token: z
            .string({
              error: (issue) =>
                issue.input === undefined
                  ? 'is required: set SLUICE_ADMIN_TOKEN, --admin-token or admin.token to a secret of at least 16 characters (e.g. `openssl rand -hex 32`)'
                  : undefined,
            })
            .min(16, 'the admin token must have at least 16 characters')
            .describe(
              'Bearer token for /admin/* (at least 16 characters, e.g. `openssl rand -hex 32`); ' +
                'required; the placeholder of the examples is refused',
            ),
        },
        {
          error: (issue) =>
            issue.input === undefined
              ? 'is required (admin.token): set SLUICE_ADMIN_TOKEN, --admin-token or admin.token to a secret of at least 16 characters (e.g. `openssl rand -hex 32`)'
              : undefined,
        },
      )
      .describe('The admin listener (operators and Prometheus only)'),
    valkey: z
      .strictObject({
        client: z.enum(CLIENT_KINDS).default(DEFAULT_CLIENT).describe('The Valkey client library'),
        mode: z
          .enum(TOPOLOGIES)
          .default('standalone')
          .describe('standalone, or cluster (give any node or nodes of the cluster)'),
        nodes: z
          .array(hostPort)
          .min(1)
          .default(['127.0.0.1:6379'])
          .describe('Valkey nodes as "host:port"'),
        connectTimeoutMs: positiveInt.default(2000).describe('Time allowed to connect to Valkey'),
        commandTimeoutMs: positiveInt
          .default(250)
          .describe('Time allowed to one Valkey command before it counts as a store failure'),
        inflightLimit: positiveInt
          .default(1000)
          .describe(
            'Valkey commands in flight at once; beyond, a command fails as a store failure',
          ),
      })
      .prefault({})
      .describe('Where the shared quotas and the pressure multipliers live'),
    upstreams: z
      .array(Upstream, {
        error: (issue) =>
          issue.input === undefined
            ? 'is required: give the relay nodes behind the gateway (upstreams: [{ id, url }] in the file, or --upstream ID=URL)'
            : undefined,
      })
      .min(1, 'at least one upstream relay node is required')
      .describe('The relay nodes behind the gateway (at least one)'),
    routing: z
      .enum(ROUTING_MODES)
      .default('sticky')
      .describe(
        "sticky: a client's writes go to one node (by its hash); round-robin: spread them; " +
          'headroom: each HTTP request and each new WebSocket goes to the better of two random ' +
          'healthy nodes by multiplier, never to one at 0 or in emergency while another can take it',
      ),
    healthCheck: z
      .strictObject({
        path: z
          .string()
          .startsWith('/')
          .default('/healthz')
          .describe("Path of each relay node's health endpoint"),
        intervalMs: positiveInt.default(2000).describe('How often each node is checked'),
        timeoutMs: positiveInt.default(1000).describe('A check slower than this fails'),
        failuresToDown: positiveInt
          .default(2)
          .describe('Consecutive failures before a node leaves rotation'),
      })
      .prefault({})
      .describe('Health checks of the relay nodes'),
    trustedProxies: z
      .array(z.string())
      .default([])
      .describe(
        'Peers (IPs or CIDRs) whose X-Forwarded-For is believed, e.g. ["10.0.0.0/8"]; nobody by default',
      ),
    identity: z
      .strictObject({
        order: z
          .array(z.enum(IDENTITY_SOURCES))
          .min(1)
          .default(['apiKey', 'pubkey', 'ip'])
          .describe(
            "Where a client's identity comes from, first match wins: apiKey (a known key), auth " +
              '(a NIP-42 authenticated pubkey), ip; pubkey also charges the verified author of an EVENT',
          ),
        apiKeyHeader: z
          .string()
          .default('x-api-key')
          .transform((h) => h.toLowerCase())
          .describe('Request header holding the API key'),
        keySalt: z
          .string()
          .min(1)
          .default(DEFAULT_KEY_SALT)
          .describe(
            'Secret salt of the identity hashes in Valkey; every gateway sharing a quota must use ' +
              'the same one (the public default is warned about at start)',
          ),
        forwardCredentials: z
          .array(z.string().transform((h) => h.toLowerCase()))
          .default([])
          .describe(
            'Credential headers passed on to the relays (the API key header and Authorization ' +
              'are removed otherwise), e.g. ["authorization"] for relays that check NIP-98',
          ),
        ipv6PrefixLength: z
          .number()
          .int()
          .min(1)
          .max(128)
          .default(64)
          .describe('IPv6 clients are one client per network of this prefix (128: per address)'),
        pubkeyTiers: z
          .record(z.string(), z.string().min(1))
          .default({})
          .describe(
            'Tier -> file of pubkeys (one a line, hex or npub, # comments), e.g. ' +
              '{"paid": "paid-members.txt"}: an authenticated (auth) or verified (pubkey) key ' +
              "listed is charged by that tier; paths are relative to the configuration file's " +
              'directory; reread on SIGHUP (a bad file keeps the running set)',
          ),
      })
      .prefault({})
      .describe('Who a client is, for its quota'),
    quotas: z
      .strictObject({
        enabled: z.boolean().default(true).describe('Off: a plain proxy (the benchmark ceiling)'),
        mode: z
          .enum(QUOTA_MODES)
          .default('enforce')
          .describe(
            'enforce, or shadow: compute, count (outcome="shadow_limited"), log and send headers, ' +
              'refuse nobody (a dry run); switchable at runtime through the admin API',
          ),
        headers: z
          .strictObject({
            legacy: z
              .boolean()
              .default(false)
              .describe(
                'Also send X-RateLimit-Limit, -Remaining and -Reset (seconds from now); ' +
                  'RateLimit-Policy and RateLimit are always sent',
              ),
          })
          .prefault({})
          .describe('Rate-limit headers of answers'),
        keyPrefix: z
          .string()
          .regex(/^[A-Za-z0-9:_-]+$/)
          .default('sluice')
          .describe('Prefix of every Valkey key the gateway writes'),
        tiers: z
          .record(z.string(), Tier)
          .default({ default: { write: { points: 600, windowSec: 60 } } })
          .describe('Named quotas; a client gets defaultTier unless its API key names another'),
        defaultTier: z
          .string()
          .default('default')
          .describe('The tier of clients without an API key'),
        apiKeys: z
          .record(z.string(), z.string())
          .default({})
          .describe(
            'API key -> tier; a key may be given as "sha256:<hex>" to keep it out of the file',
          ),
        routes: z
          .array(Route)
          .default([])
          .describe(
            'HTTP routes and their quota class, first match wins; unmatched requests are reads for GET, HEAD and OPTIONS, writes otherwise (cost 1)',
          ),
        denyPaths: z
          .array(z.string().startsWith('/'))
          .default(DEFAULT_DENY_PATHS)
          .describe(
            'Path prefixes answered 404 and never forwarded, whatever the method and case; ' +
              'checked before routes; [] forwards everything',
          ),
        allowList: z
          .array(z.string())
          .default([])
          .describe('Identities (IP, pubkey hex or API key) that bypass quotas'),
        inMemoryBlock: z
          .boolean()
          .default(true)
          .describe('Refuse known over-limit clients from memory, without a Valkey round trip'),
        gateways: positiveInt
          .default(1)
          .describe('Gateways sharing the quotas: the insurance limiter enforces this share'),
        onStoreFailure: z
          .enum(['insure', 'open', 'closed'])
          .default('insure')
          .describe(
            "When Valkey fails: insure (an in-memory limiter enforces this gateway's share), " +
              'open (admit), closed (503)',
          ),
        retryStoreAfterMs: positiveInt
          .default(1000)
          .describe('After a store failure, skip Valkey for this long before trying it again'),
        multiplierStep: z
          .number()
          .positive()
          .max(1)
          .default(0.05)
          .describe('Multipliers are quantised down to this step: one limiter per step'),
        ranges: Ranges,
        lease: z
          .strictObject({
            enabled: z
              .boolean()
              .default(true)
              .describe(
                "Take several points of a key's quota in one atomic round trip (never past the " +
                  'effective limit) and spend them locally; never over-admits',
              ),
            idleMs: positiveInt
              .default(10_000)
              .describe(
                'A key unused this long (or three of its own gaps between writes, if longer, ' +
                  'within its window) hands its unspent points back',
              ),
            credit: z
              .boolean()
              .default(true)
              .describe(
                "Admit a key's first point of a window before its take reaches Valkey, only " +
                  'while this gateway process is the only one taking for these quotas ' +
                  '(quotas.gateways x workers = 1 and no other process seen in Valkey within the ' +
                  'longest window) and took nothing for the key in its window: exact, without a ' +
                  'round trip on the way (docs/GATEWAY.md, "Credit for a first write")',
              ),
          })
          .prefault({})
          .describe('Quota leases (docs/GATEWAY.md, "Quota leases")'),
      })
      .prefault({})
      .describe('Per-client quotas'),
    pressure: z
      .strictObject({
        enabled: z
          .boolean()
          .default(false)
          .describe("Follow the feeds' multipliers (off: every node stays at 1)"),
        safeMultiplier: z
          .number()
          .gt(0)
          .lt(1)
          .default(0.5)
          .describe(
            'Used at cold start and when a feed goes stale: neither 1 (unsafe) nor 0 (an outage)',
          ),
        staleAfterMs: positiveInt
          .default(1500)
          .describe('No report for this long: the feed is stale (about three feed ticks)'),
        holdMs: positiveInt
          .default(2000)
          .describe("How long a stale feed's last value is held before moving to the safe value"),
        freshReportsToTrust: positiveInt
          .default(3)
          .describe('Reports needed after a gap before the feed is trusted again'),
        rampUpPerSec: z
          .number()
          .positive()
          .default(0.1)
          .describe('Fastest rise of a multiplier once trusted again, per second'),
        evaluateMs: positiveInt.default(250).describe('How often staleness is re-evaluated'),
        avoidEmergency: z
          .boolean()
          .default(false)
          .describe(
            'New connections and non-sticky writes avoid a node in emergency when others can take them',
          ),
        drain: Drain.prefault({}),
      })
      .prefault({})
      .describe('Adaptive multipliers from the pressure feeds (docs/PRESSURE.md)'),
    limits: z
      .strictObject({
        maxFrameBytes: positiveInt
          .default(128 * 1024)
          .describe('Largest WebSocket message; larger ones are refused'),
        maxBodyBytes: positiveInt.default(1024 * 1024).describe('Largest HTTP request body'),
        maxQueuedFrames: positiveInt
          .default(64)
          .describe('Client frames waiting for a decision before the socket is paused'),
        framesPerSecPerAddress: positiveInt
          .default(1000)
          .describe(
            'WebSocket frames one source address may send per second, over all its connections',
          ),
        maxConnectionsPerAddress: positiveInt
          .default(256)
          .describe(
            'WebSocket connections (open or opening) one source address may hold; beyond: 429',
          ),
        maxTrackedClients: positiveInt
          .default(DEFAULT_MAX_TRACKED_CLIENTS)
          .describe(
            'Clients held in memory by each per-client structure (identity hashes, range ' +
              'identities, blocks, insurance counters, frame rates); past it the least recently ' +
              'seen is forgotten',
          ),
        maxBufferedBytesPerClient: positiveInt
          .default(4 * 1024 * 1024)
          .describe(
            'Bytes waiting for a client that does not read: past half (at most 1 MiB) it is not ' +
              'read from, past this it is closed (1008)',
          ),
        headersTimeoutMs: positiveInt
          .default(10_000)
          .describe("A client's request headers must all arrive within this (else 408, closed)"),
        requestTimeoutMs: positiveInt
          .default(30_000)
          .describe("A client's whole request, body included, must arrive within this (else 408)"),
        keepAliveTimeoutMs: positiveInt
          .default(5_000)
          .describe('An idle keep-alive connection is closed after this'),
        upstreamTimeoutMs: positiveInt
          .default(30_000)
          .describe('A relay must connect and start answering within this (else 504)'),
        earlyRetries: z
          .strictObject({
            holdMs: positiveInt
              .default(2000)
              .describe(
                'A write refused with a retry time and sent again before it (the same event ' +
                  'from the same address) is answered rate-limited:, unjudged; from its second ' +
                  'early copy on, after this long (at most until its retry time): a bouncer ' +
                  'gets fewer answers than it sends',
              ),
            max: positiveInt
              .default(20)
              .describe(
                'Early retries one address may send in windowSec before its WebSocket is ' +
                  'closed (1008, rate-limited:)',
              ),
            windowSec: positiveInt.default(60).describe('The window of max'),
          })
          .prefault({})
          .describe('Writes sent again before their retry time (docs/NOSTR.md)'),
      })
      .refine((l) => l.headersTimeoutMs <= l.requestTimeoutMs, {
        path: ['headersTimeoutMs'],
        message: 'must not exceed requestTimeoutMs (the headers are part of the request)',
      })
      .prefault({})
      .describe('Bounds on what one client may hold or send'),
    nostr: z
      .preprocess(
        deprecatedVerifySignatures,
        z.strictObject({
          verify: z
            .enum(['auto', 'always', 'relay', 'never'])
            .default('auto')
            .describe(
              'Who checks EVENT signatures: auto, the gateway where the answer decides something ' +
                "(with the pubkey identity: an author near its limit or not yet charged; one with room is charged on the event's hash " +
                'and refunded when the relay refuses it, docs/NOSTR.md); always, the gateway, every EVENT; relay, the relay alone ' +
                '(the author is charged when its OK accepts); never (refused with the pubkey ' +
                'identity). The older verifySignatures: true | false still reads as always | never',
            ),
          maxInvalidEvents: positiveInt
            .default(10)
            .describe('EVENTs failing verification on one connection before it is closed (1008)'),
          costs: EventCosts.prefault({}).describe(
            'Write points per EVENT by kind and size (HTTP routes keep their own cost)',
          ),
          httpEventPaths: z
            .array(z.string().startsWith('/'))
            .default(['/events'])
            .describe(
              "Paths where a POST carries one Nostr event (the reference relay's HTTP write): " +
                'judged by the same event policy as a WebSocket EVENT (kinds, proof of work, ' +
                "costs, the author's quota) instead of by its route; [] judges them by route",
            ),
          blockedKinds: z
            .array(KindSpec)
            .default([])
            .describe('Kinds answered blocked: and never forwarded, e.g. [4, "1000-1999"]'),
          exemptKinds: z
            .array(KindSpec)
            .default([24133])
            .describe(
              "Kinds written free of every write quota (sender's and author's): NIP-46 signing " +
                '(24133) by default, which rate limits break; frame rate, connections and sizes ' +
                'still bound them, blockedKinds and pow still apply; [] charges them',
            ),
          publicUrl: z
            .url({ protocol: /^wss?$/ })
            .optional()
            .describe(
              'The ws:// or wss:// URL clients use for this gateway: an AUTH event must name it; ' +
                'needed by the auth identity and authRequiredForWrites',
            ),
          authRequiredForWrites: z
            .boolean()
            .default(false)
            .describe(
              'EVENTs from connections that have not authenticated (NIP-42) get auth-required:',
            ),
          auth: z
            .strictObject({
              challenge: z
                .enum(['relay', 'gateway'])
                .default('relay')
                .describe(
                  "Whose NIP-42 challenge clients answer: relay, the relay's (passed on; the " +
                    'relay answers AUTH too); gateway, its own, sent on connect, with AUTH ' +
                    "answered by the gateway and never forwarded, the relay's challenge " +
                    'withheld (for relays without NIP-42). gateway needs publicUrl',
                ),
            })
            .prefault({})
            .describe('NIP-42 AUTH (docs/NOSTR.md)'),
          maxSubscriptions: positiveInt
            .optional()
            .describe(
              'Open subscriptions (REQ ids) per connection; a REQ beyond: CLOSED restricted:',
            ),
          maxFiltersPerReq: positiveInt
            .optional()
            .describe('Filters in one REQ or COUNT; beyond: CLOSED restricted:'),
          pow: z
            .strictObject({
              minDifficulty: z
                .number()
                .int()
                .min(0)
                .max(256)
                .default(0)
                .describe(
                  'Events credited with fewer leading zero bits are refused pow: (0: none)',
                ),
              discount: z
                .strictObject({
                  perBits: z
                    .number()
                    .int()
                    .min(1)
                    .max(256)
                    .describe('Each whole perBits above minDifficulty ...'),
                  factor: z.number().gt(0).lt(1).describe('... multiplies the cost by factor'),
                })
                .optional()
                .describe('Cheaper writes for more work (rounded up, at least 1 point)'),
              adaptive: z
                .strictObject({
                  enabled: z
                    .boolean()
                    .default(false)
                    .describe(
                      "Ask more work of authors without a tier, unauthenticated, while a node's " +
                        'multiplier is below 1 (members are never asked)',
                    ),
                  bitsPerHalving: z
                    .number()
                    .gt(0)
                    .max(64)
                    .default(4)
                    .describe('Leading zero bits added for each halving of the multiplier'),
                  maxDifficulty: z
                    .number()
                    .int()
                    .min(0)
                    .max(256)
                    .default(28)
                    .describe('The most ever asked (what a multiplier of 0 asks)'),
                })
                .prefault({})
                .describe(
                  'Work instead of refusal under pressure: the difficulty in force is ' +
                    'minDifficulty + ceil(bitsPerHalving x log2(1 / m)), at most maxDifficulty',
                ),
            })
            .prefault({})
            .describe(
              "NIP-13 proof of work on event ids (the nonce tag's committed target caps it)",
            ),
          trust: TrustSettingsSchema.optional(),
        }),
      )
      .prefault({})
      .describe("The operator's Nostr policy (docs/NOSTR.md)"),
    logging: z
      .strictObject({
        level: z
          .enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'])
          .default('info')
          .describe('Log level (logs go to stderr as JSON lines)'),
        requests: z.boolean().default(false).describe('Log every request'),
      })
      .prefault({})
      .describe('Logging'),
    shutdownGraceMs: positiveInt
      .default(10_000)
      .describe('On SIGTERM, time given to requests in flight before connections are cut'),
    workers: z
      .union([z.literal('auto'), positiveInt.max(64)])
      .default(1)
      .describe(
        'Gateway processes behind the listening port (default 1: on a host whose cores the ' +
          'relay shares, a second process costs more CPU per write for no more writes; see ' +
          'docs/BENCHMARKS.md); auto is one per core, for a gateway host of its own; with more than ' +
          'one, a primary holds both listeners, hands all connections of a client address to ' +
          'one worker (per-address limits hold per gateway) and forwards admin requests',
      ),
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
    for (const tier of Object.keys(cfg.quotas.tiers)) {
      if (tier.startsWith(RANGE_TIER_PREFIX)) {
        ctx.addIssue({
          code: 'custom',
          path: ['quotas', 'tiers', tier],
          message: `tier names starting "${RANGE_TIER_PREFIX}" are the address ranges' own`,
        });
      }
    }
    for (const issue of rangeProblems(cfg)) ctx.addIssue({ code: 'custom', ...issue });
    for (const [key, tier] of Object.entries(cfg.quotas.apiKeys)) {
      if (!cfg.quotas.tiers[tier]) {
        ctx.addIssue({
          code: 'custom',
          path: ['quotas', 'apiKeys', key],
          message: `tier "${tier}" is not defined`,
        });
      }
    }
    for (const tier of Object.keys(cfg.identity.pubkeyTiers)) {
      if (!cfg.quotas.tiers[tier]) {
        ctx.addIssue({
          code: 'custom',
          path: ['identity', 'pubkeyTiers', tier],
          message: `names tier "${tier}", which quotas.tiers does not define (tiers: ${Object.keys(cfg.quotas.tiers).join(', ')})`,
        });
      }
    }
    const trustTier = cfg.nostr.trust?.tier;
    if (
      trustTier !== undefined &&
      !cfg.identity.order.includes('pubkey') &&
      !cfg.identity.order.includes('auth')
    ) {
      ctx.addIssue({
        code: 'custom',
        path: ['nostr', 'trust'],
        message:
          'needs the pubkey or auth identity (identity.order): the tier is given to a verified author or an authenticated key',
      });
    }
    if (trustTier !== undefined && !cfg.quotas.tiers[trustTier]) {
      ctx.addIssue({
        code: 'custom',
        path: ['nostr', 'trust', 'tier'],
        message: `names tier "${trustTier}", which quotas.tiers does not define (tiers: ${Object.keys(cfg.quotas.tiers).join(', ')})`,
      });
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
    const needsAuth =
      cfg.identity.order.includes('auth') ||
      cfg.nostr.authRequiredForWrites ||
      cfg.nostr.auth.challenge === 'gateway';
    if (needsAuth && cfg.nostr.publicUrl === undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['nostr', 'publicUrl'],
        message:
          'is required by NIP-42 AUTH (the auth identity, authRequiredForWrites or auth.challenge gateway): the ws:// or wss:// URL clients use, which their AUTH events name',
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

/**
 * What is wrong with quotas.ranges, when they are on: each family's prefixes distinct and
 * shorter than the client itself (/32, identity.ipv6PrefixLength), and no range tighter (in
 * points a second) than the default tier or than a range it holds, so that an honest client
 * alone in its range meets its own limit first and a wider range never decides before a
 * narrower one would.
 */
function rangeProblems(cfg: {
  identity: { ipv6PrefixLength: number };
  quotas: { defaultTier: string; tiers: Record<string, Tier>; ranges: Ranges };
}): { path: (string | number)[]; message: string }[] {
  const { ranges } = cfg.quotas;
  if (!ranges.enabled) return [];
  const problems: { path: (string | number)[]; message: string }[] = [];
  const base = cfg.quotas.tiers[cfg.quotas.defaultTier]?.write;
  const rate = (l: Limit) => l.points / l.windowSec;
  const own = { ipv4: 32, ipv6: cfg.identity.ipv6PrefixLength };
  for (const family of ['ipv4', 'ipv6'] as const) {
    const list = ranges[family];
    list.forEach((range, i) => {
      const path = ['quotas', 'ranges', family, i];
      const narrower = list.filter((r) => r.prefixLength > range.prefixLength);
      if (range.prefixLength >= own[family]) {
        const what = family === 'ipv4' ? 'the address (/32)' : 'identity.ipv6PrefixLength';
        problems.push({
          path: [...path, 'prefixLength'],
          message: `/${range.prefixLength} is not shorter than ${what}: a range holds many clients`,
        });
      } else if (list.findIndex((r) => r.prefixLength === range.prefixLength) !== i) {
        problems.push({
          path: [...path, 'prefixLength'],
          message: `/${range.prefixLength} appears twice`,
        });
      } else if (base && rate(range.write) < rate(base)) {
        problems.push({
          path: [...path, 'write'],
          message: `allows fewer writes a second than the default tier (${base.points} per ${base.windowSec}s): a client alone in its range would be refused by the range first`,
        });
      } else if (narrower.some((r) => rate(range.write) < rate(r.write))) {
        problems.push({
          path: [...path, 'write'],
          message: `allows fewer writes a second than a range inside it: set it at least as high`,
        });
      }
    });
  }
  return problems;
}
