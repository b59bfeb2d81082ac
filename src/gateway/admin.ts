import { timingSafeEqual, createHash } from 'node:crypto';
import Fastify, { LogController } from 'fastify';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import {
  LawParamsSchema,
  decodeLawParams,
  lawParamsKey,
  lawParamsProblem,
} from '../pressure/laws/law-params.js';
import { QUOTA_MODES } from '../config/schema.js';
import { makeIdentity, sourceOfPrefix } from '../quota/policy.js';
import type { GatewayContext } from './context.js';

const LimitBody = z.object({
  points: z.number().int().min(0),
  windowSec: z.number().int().positive(),
});
/** POST /admin/flow-control: change base quotas, modes and per-node multipliers (not persisted). */
const FlowControlChange = z
  .object({
    tiers: z
      .record(
        z.string(),
        z
          .object({
            write: LimitBody.optional(),
            read: LimitBody.nullable().optional(),
            /** The tier's own mode; null: it follows the global mode again. */
            mode: z.enum(QUOTA_MODES).nullable().optional(),
          })
          .strict(),
      )
      .optional(),
    /** A static multiplier per node; null hands the node back to its feed. */
    nodes: z
      .record(z.string(), z.object({ multiplier: z.number().min(0).max(1).nullable() }).strict())
      .optional(),
    adaptation: z.object({ enabled: z.boolean() }).strict().optional(),
    /** enforce or shadow, for every tier without a mode of its own. */
    mode: z.enum(QUOTA_MODES).optional(),
    /** Parameters for the feeds' control law ({} restores the defaults); feeds pick them up within ~10 ticks. */
    law: z
      .object({ nodes: z.array(z.string()).optional(), params: LawParamsSchema })
      .strict()
      .optional(),
  })
  .strict();

function problem(reply: FastifyReply, status: number, title: string, detail: string) {
  return reply
    .code(status)
    .type('application/problem+json')
    .send({ type: 'about:blank', title, status, detail });
}

/** Constant-time token check; hashing first makes the lengths equal. */
function tokenMatches(presented: string, expected: string): boolean {
  const a = createHash('sha256').update(presented).digest();
  const b = createHash('sha256').update(expected).digest();
  return timingSafeEqual(a, b);
}

/**
 * The admin listener, on a port of its own. /metrics, /healthz and /readyz are open (the
 * listener binds to loopback by default); every other route needs the bearer token.
 *
 * The token is checked by a hook of the plugin that holds those routes, so it runs for
 * whichever route matched, however the request spelled it (`/%61dmin/...`, an absolute-form
 * target): a check on the raw URL would miss every spelling the router normalises. A
 * spelling that matches no route is a 404 from the root, which has no hook.
 */
export function buildAdminApp(ctx: GatewayContext): FastifyInstance {
  const app = Fastify({
    loggerInstance: ctx.log.child({}, { serializers: { req: routeOfRequest } }),
    logController: new LogController({ disableRequestLogging: !ctx.config.logging.requests }),
  });
  registerOpenRoutes(app, ctx);
  void app.register((guarded, _options, done) => {
    guarded.addHook('onRequest', async (request, reply) => {
      const header = request.headers.authorization ?? '';
      const token = header.startsWith('Bearer ') ? header.slice(7) : '';
      if (token && tokenMatches(token, ctx.config.admin.token)) return;
      reply.header('www-authenticate', 'Bearer realm="sluice-admin"');
      return problem(
        reply,
        401,
        'Unauthorized',
        'the admin endpoints need "Authorization: Bearer <admin token>"',
      );
    });
    registerAdminRoutes(guarded, ctx);
    done();
  });
  return app;
}

/**
 * How request log lines show an admin request: by the route it matched, not its URL, which
 * can carry a secret (`/admin/clients/key:<api key>`).
 */
function routeOfRequest(request: FastifyRequest) {
  return {
    method: request.method,
    route: request.routeOptions.url ?? '(no route)',
    remoteAddress: request.ip,
  };
}

/** Prometheus and the health checks: no token, nothing they answer is secret. */
function registerOpenRoutes(app: FastifyInstance, ctx: GatewayContext): void {
  app.get('/metrics', async (_request, reply) => {
    reply.type(ctx.metrics.registry.contentType);
    return ctx.metrics.registry.metrics();
  });

  app.get('/healthz', () => ({ status: 'ok' }));

  app.get('/readyz', async (_request, reply) => {
    const problems: string[] = [];
    try {
      await ctx.store.ping();
    } catch (err) {
      problems.push(`valkey: ${(err as Error).message}`);
    }
    if (!ctx.pool.anyHealthy()) problems.push('no relay node is healthy');
    return reply.code(problems.length ? 503 : 200).send({ ready: problems.length === 0, problems });
  });
}

type FlowControlChange = z.infer<typeof FlowControlChange>;

/** Why the change cannot be applied, or undefined: checked whole before any part is applied. */
function flowControlProblem(
  ctx: GatewayContext,
  change: FlowControlChange,
): { title: string; detail: string } | undefined {
  const unknownTier = Object.keys(change.tiers ?? {}).find(
    (t) => !ctx.policy.tierNames().includes(t),
  );
  if (unknownTier) return { title: 'Unknown tier', detail: `tiers.${unknownTier}: no such tier` };
  const unknownNode = Object.keys(change.nodes ?? {}).find((n) => !ctx.board.has(n));
  if (unknownNode)
    return { title: 'Unknown node', detail: `nodes.${unknownNode}: no such relay node` };
  if (change.law) {
    const lawProblem = lawParamsProblem(change.law.params);
    if (lawProblem) return { title: 'Invalid law parameters', detail: lawProblem };
    const unknownLawNode = lawTargets(ctx, change.law).find((n) => !ctx.board.has(n));
    if (unknownLawNode)
      return { title: 'Unknown node', detail: `law.nodes: no relay node "${unknownLawNode}"` };
  }
  return undefined;
}

function lawTargets(ctx: GatewayContext, law: NonNullable<FlowControlChange['law']>): string[] {
  return law.nodes ?? ctx.board.list().map((m) => m.nodeId);
}

/**
 * Save law parameters for each node, all or none: when one write fails, the nodes already
 * written get their previous parameters back (as far as the failing store lets us).
 */
async function saveLawParams(
  ctx: GatewayContext,
  nodes: readonly string[],
  params: Record<string, number>,
): Promise<void> {
  const previous = new Map<string, string | null>();
  try {
    for (const node of nodes) {
      previous.set(node, await ctx.store.kv.get(lawParamsKey(node)));
      await ctx.store.kv.set(lawParamsKey(node), JSON.stringify(params));
    }
  } catch (err) {
    await Promise.allSettled(
      [...previous].map(([node, old]) =>
        old === null
          ? ctx.store.kv.del(lawParamsKey(node))
          : ctx.store.kv.set(lawParamsKey(node), old),
      ),
    );
    throw err;
  }
}

/** The in-memory part of a validated change: nothing here can fail. */
function applyFlowControl(ctx: GatewayContext, change: FlowControlChange): void {
  for (const [tier, limits] of Object.entries(change.tiers ?? {})) {
    if (limits.write) ctx.policy.setLimit(tier, 'write', limits.write);
    if (limits.read !== undefined) ctx.policy.setLimit(tier, 'read', limits.read ?? undefined);
    if (limits.mode !== undefined) ctx.policy.setTierMode(tier, limits.mode ?? undefined);
  }
  if (change.mode) ctx.policy.setMode(change.mode);
  for (const [node, { multiplier }] of Object.entries(change.nodes ?? {})) {
    ctx.board.setOverride(node, multiplier);
  }
  if (change.adaptation) ctx.board.setAdaptive(change.adaptation.enabled);
}

/** Every route that needs the token (registered inside the guarded plugin). */
function registerAdminRoutes(app: FastifyInstance, ctx: GatewayContext): void {
  app.get('/admin/flow-control', () => flowControlState(ctx));
  // The Valkey client and the settings it was given, as passed to the library (benchmarks
  // record them with each result).
  app.get('/admin/valkey', () => ({
    client: ctx.config.valkey.client,
    mode: ctx.config.valkey.mode,
    nodes: ctx.config.valkey.nodes,
    settings: ctx.store.settings,
  }));
  app.get('/admin/flow-control/law', (_request, reply) => lawParamsRoute(ctx, reply));
  app.post('/admin/flow-control', (request, reply) => changeFlowControl(ctx, request.body, reply));
  app.get<{ Params: { id: string }; Querystring: { node?: string } }>(
    '/admin/clients/:id',
    (request, reply) => clientUsage(ctx, request.params.id, request.query.node, reply),
  );
}

/** GET /admin/flow-control/law: the law parameters saved for each node. */
async function lawParamsRoute(ctx: GatewayContext, reply: FastifyReply) {
  try {
    const entries = await Promise.all(
      ctx.board
        .list()
        .map(async (m) => [
          m.nodeId,
          decodeLawParams(await ctx.store.kv.get(lawParamsKey(m.nodeId))) ?? {},
        ]),
    );
    return {
      params: Object.fromEntries(entries) as Record<string, unknown>,
      note: "overrides of the feeds' defaults",
    };
  } catch (err) {
    return problem(reply, 503, 'Quota store unavailable', (err as Error).message);
  }
}

/**
 * POST /admin/flow-control, all or nothing: validate the whole change, then the one step that
 * can fail (saving law parameters to Valkey), and only then the in-memory changes, which cannot.
 */
async function changeFlowControl(ctx: GatewayContext, body: unknown, reply: FastifyReply) {
  const parsed = FlowControlChange.safeParse(body);
  if (!parsed.success) {
    const detail = parsed.error.issues
      .map((i) => `${i.path.join('.') || '(body)'}: ${i.message}`)
      .join('; ');
    return problem(reply, 400, 'Invalid flow-control change', detail);
  }
  const change = parsed.data;
  const refused = flowControlProblem(ctx, change);
  if (refused) return problem(reply, 400, refused.title, refused.detail);
  if (change.law) {
    try {
      await saveLawParams(ctx, lawTargets(ctx, change.law), change.law.params);
    } catch (err) {
      return problem(
        reply,
        503,
        'Quota store unavailable',
        `the change was not applied: law parameters not saved: ${(err as Error).message}`,
      );
    }
  }
  applyFlowControl(ctx, change);
  ctx.log.info({ change }, 'flow control changed from the admin endpoint');
  return flowControlState(ctx);
}

/** GET /admin/clients/:id: what a client has used of its write and read quotas on a node. */
async function clientUsage(
  ctx: GatewayContext,
  id: string,
  node: string | undefined,
  reply: FastifyReply,
) {
  const match = /^([a-z]+):(.+)$/.exec(id);
  const source = match ? sourceOfPrefix(match[1]!) : undefined;
  if (!match || !source) {
    return problem(
      reply,
      400,
      'Invalid client id',
      'use ip:<address>, pk:<pubkey hex>, auth:<pubkey hex> or key:<api key>',
    );
  }
  const nodeId = node ?? ctx.pool.list()[0]!.id;
  if (!ctx.board.has(nodeId))
    return problem(reply, 400, 'Unknown node', `no relay node "${nodeId}"`);
  const raw = match[2]!;
  const tier = tierOfClient(ctx, source, raw);
  if (!tier) return problem(reply, 404, 'Unknown API key', 'this API key is not configured');
  const identity = makeIdentity(source, raw, tier, ctx.config.identity.keySalt);
  try {
    return {
      client: id,
      node: nodeId,
      tier,
      write: await ctx.decider.usage(identity, 'write', nodeId),
      read: await ctx.decider.usage(identity, 'read', nodeId),
    };
  } catch (err) {
    return problem(reply, 503, 'Quota store unavailable', (err as Error).message);
  }
}

/** A pubkey in its listed tier (identity.pubkeyTiers) or nostr.trust's, else the default, as charged. */
function tierOfClient(
  ctx: GatewayContext,
  source: NonNullable<ReturnType<typeof sourceOfPrefix>>,
  raw: string,
): string | undefined {
  if (source === 'apiKey') return ctx.policy.tierOfApiKey(raw);
  if (source === 'pubkey' || source === 'auth') {
    return ctx.policy.tierOfAuthor(raw);
  }
  return ctx.policy.defaultTier;
}

async function flowControlState(ctx: GatewayContext) {
  const now = Date.now();
  const nodes = await Promise.all(
    ctx.board.list().map(async (m) => {
      const upstream = ctx.pool.get(m.nodeId);
      const writeBudget = await ctx.decider.nodeBudgetState(m.nodeId);
      return [
        m.nodeId,
        {
          multiplier: m.value,
          source: m.source,
          ageMs: now - m.updatedAt,
          override: ctx.board.hasOverride(m.nodeId),
          feedState: m.feedState ?? null,
          emergency: m.emergency ?? false,
          healthy: upstream?.healthy ?? false,
          // upstreams[].writeBudget: the base, and what is in force and consumed under pressure.
          ...(writeBudget ? { writeBudget } : {}),
        },
      ] as const;
    }),
  );
  return {
    tiers: ctx.policy.snapshot(),
    nodes: Object.fromEntries(nodes),
    adaptation: { enabled: ctx.board.isAdaptive, feeds: ctx.config.pressure.enabled },
    quotas: {
      mode: ctx.policy.mode,
      onStoreFailure: ctx.config.quotas.onStoreFailure,
      gateways: ctx.config.quotas.gateways,
      inMemoryBlock: ctx.config.quotas.inMemoryBlock,
      multiplierStep: ctx.config.quotas.multiplierStep,
      storeDown: ctx.decider.storeDown,
    },
    persisted: false,
  };
}
