import { createHash, timingSafeEqual } from 'node:crypto';
import Fastify from 'fastify';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { FilterError, filterFromQuery } from './filter.js';
import type { Flusher } from './flusher.js';
import type { IndexStore } from './index-store.js';
import type { RelayMetrics, RelayStats } from './metrics.js';
import { MAX_SPIKE_BYTES, SpikeError } from './spike.js';
import type { SpikeManager } from './spike.js';
import type { EventStore } from './store.js';

export interface RelayLimits {
  maxEventBytes: number;
  maxMessageBytes: number;
  maxLimit: number;
  maxSubscriptions: number;
  maxFilters: number;
}

export interface HttpDeps {
  nodeId: string;
  version: string;
  limits: RelayLimits;
  store: EventStore;
  index: IndexStore;
  flusher: Flusher;
  spikes: SpikeManager;
  metrics: RelayMetrics;
  stats: () => RelayStats;
  /**
   * Bearer token of /admin/spike and /admin/drain; without one they answer 404. The socket
   * address proves nothing: a proxy on the same machine (the gateway) makes every client
   * look local.
   */
  adminToken?: string;
}

const CORS = {
  'access-control-allow-origin': '*',
  'access-control-allow-headers': '*',
  'access-control-allow-methods': 'GET, OPTIONS',
};

const SpikeBody = z.strictObject({
  bytes: z.number().int().min(1).max(MAX_SPIKE_BYTES),
  holdMs: z.number().int().min(1).max(600_000).default(1000),
});

const DrainBody = z.strictObject({
  bytesPerSec: z.number().int().min(0),
});

/** NIP-11 information document. */
export function relayInfo(deps: Pick<HttpDeps, 'nodeId' | 'version' | 'limits'>) {
  return {
    name: `sluice-relay ${deps.nodeId}`,
    description:
      'sluice reference relay: a memtable drained to an append-only file at a set rate, so memory follows the backlog',
    supported_nips: [1, 11],
    software: 'sluice-relay',
    version: deps.version,
    limitation: {
      max_message_length: deps.limits.maxMessageBytes,
      max_content_length: deps.limits.maxEventBytes,
      max_subscriptions: deps.limits.maxSubscriptions,
      max_filters: deps.limits.maxFilters,
      max_limit: deps.limits.maxLimit,
      auth_required: false,
      payment_required: false,
    },
  };
}

/** The relay's HTTP side: NIP-11, writes and reads over HTTP, health, stats, admin. */
export function buildHttp(deps: HttpDeps): FastifyInstance {
  const app = Fastify({ logger: false, bodyLimit: deps.limits.maxMessageBytes });

  app.setErrorHandler((err: Error & { statusCode?: number }, request, reply) => {
    const status = err.statusCode && err.statusCode >= 400 ? err.statusCode : 500;
    if (status >= 500) console.error(`relay ${deps.nodeId}: ${request.url}: ${err.stack}`);
    const message = status >= 500 ? `error: ${err.message}` : `invalid: ${err.message}`;
    if (request.method === 'POST' && request.url === '/events') {
      return reply.code(status).send({ accepted: false, message });
    }
    return reply.code(status).send({ error: message });
  });

  app.get('/', async (request, reply) => {
    if ((request.headers.accept ?? '').includes('application/nostr+json')) {
      return reply
        .headers(CORS)
        .type('application/nostr+json')
        .send(JSON.stringify(relayInfo(deps)));
    }
    return reply
      .type('text/plain')
      .send(`sluice relay ${deps.nodeId}: speak Nostr (NIP-01) over WebSocket on this URL\n`);
  });
  app.options('/', async (_request, reply) => reply.headers(CORS).code(204).send());

  app.post('/events', async (request, reply) => {
    const result = deps.store.submit(request.body);
    if (!result.accepted) return reply.code(400).send({ accepted: false, message: result.message });
    return result.duplicate
      ? { id: result.id, accepted: true, message: 'duplicate: already have this event' }
      : { id: result.id, accepted: true };
  });

  app.get('/events', async (request, reply) => {
    let filter;
    try {
      filter = filterFromQuery(request.query as Record<string, unknown>);
    } catch (err) {
      if (err instanceof FilterError)
        return reply.code(400).send({ error: `invalid: ${err.message}` });
      throw err;
    }
    const events = await deps.index.query([filter]);
    return reply.type('application/json').send(`[${events.join(',')}]`);
  });

  app.get('/healthz', (_request, reply) => reply.send({ status: 'ok', nodeId: deps.nodeId }));
  app.get('/stats', (_request, reply) => reply.send(deps.stats()));
  app.get('/metrics', async (_request, reply) =>
    reply.type(deps.metrics.registry.contentType).send(await deps.metrics.render()),
  );

  const adminOnly = adminGuard(deps.adminToken);
  app.post('/admin/spike', { onRequest: adminOnly }, async (request, reply) => {
    const body = SpikeBody.safeParse(request.body ?? {});
    if (!body.success)
      return reply.code(400).send({ error: `invalid: ${z.prettifyError(body.error)}` });
    try {
      await deps.spikes.trigger(body.data.bytes, body.data.holdMs);
    } catch (err) {
      if (err instanceof SpikeError)
        return reply.code(503).send({ error: `error: ${err.message}` });
      throw err;
    }
    return { ...body.data, spikeBytes: deps.spikes.heldBytes };
  });

  app.post('/admin/drain', { onRequest: adminOnly }, async (request, reply) => {
    const body = DrainBody.safeParse(request.body ?? {});
    if (!body.success)
      return reply.code(400).send({ error: `invalid: ${z.prettifyError(body.error)}` });
    deps.flusher.rateBytesPerSec = body.data.bytesPerSec;
    return { drainRateBytesPerSec: deps.flusher.rateBytesPerSec };
  });

  return app;
}

/**
 * Admin endpoints answer only to the bearer of the admin token; with no token configured
 * they do not exist (404), as for any other path the relay does not serve.
 */
function adminGuard(token: string | undefined) {
  const expected = token ? sha256(token) : undefined;
  return (request: FastifyRequest, reply: FastifyReply, done: () => void): void => {
    if (!expected) {
      void reply.code(404).send({ error: 'not found' });
      return;
    }
    const header = request.headers.authorization ?? '';
    const presented = header.startsWith('Bearer ') ? header.slice(7) : '';
    // Hashing first makes the lengths equal, so the comparison takes constant time.
    if (presented && timingSafeEqual(sha256(presented), expected)) return done();
    void reply
      .code(401)
      .header('www-authenticate', 'Bearer realm="sluice-relay-admin"')
      .send({ error: 'restricted: the admin endpoints need "Authorization: Bearer <token>"' });
  };
}

function sha256(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}
