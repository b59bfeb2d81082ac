/**
 * The primary's admin listener. /metrics sums the workers (prom-client's cluster aggregator);
 * /healthz answers for the primary; every other admin request is answered by the workers' own
 * admin routes over IPC, so the token is decided there, on the matched route, exactly as with
 * one process. A change (any method but GET/HEAD) goes to every worker, since each holds its
 * own policy and pressure board.
 */
import type { Worker } from 'node:cluster';
import Fastify from 'fastify';
import type { FastifyBaseLogger, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AggregatorRegistry } from 'prom-client';
import { isMessage } from './cluster-messages.js';
import type { ToPrimary, ToWorker } from './cluster-messages.js';
import type { AdminRequest, AdminResponse } from './server.js';

const ADMIN_TIMEOUT_MS = 10_000;

/** Admin requests sent to workers, each waiting for its worker's answer (or a timeout). */
export class AdminRelay {
  private readonly pending = new Map<number, (response: AdminResponse) => void>();
  private nextId = 1;

  /** Feed every message from a worker here: admin answers settle their request. */
  readonly onMessage = (message: unknown): void => {
    type Answer = Extract<ToPrimary, { type: 'sluice:admin-response' }>;
    if (!isMessage<Answer>(message, 'sluice:admin-response')) return;
    this.pending.get(message.id)?.(message.response);
    this.pending.delete(message.id);
  };

  ask(worker: Worker, request: AdminRequest): Promise<AdminResponse> {
    const id = this.nextId++;
    return new Promise<AdminResponse>((resolve) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        resolve(
          problemResponse(504, 'Gateway Timeout', `worker ${worker.process.pid} did not answer`),
        );
      }, ADMIN_TIMEOUT_MS);
      this.pending.set(id, (response) => {
        clearTimeout(timer);
        resolve(response);
      });
      const message: ToWorker = { type: 'sluice:admin', id, request };
      worker.send(message);
    });
  }
}

/** The admin app of the primary, asking `live()` workers for everything but its own routes. */
export function buildPrimaryAdmin(
  log: FastifyBaseLogger,
  relay: AdminRelay,
  live: () => Worker[],
): FastifyInstance {
  const aggregator = new AggregatorRegistry();
  const admin = Fastify({ loggerInstance: log });
  admin.removeAllContentTypeParsers();
  admin.addContentTypeParser(
    '*',
    { parseAs: 'string', bodyLimit: 1024 * 1024 },
    (_req, body, done) => done(null, body),
  );
  admin.get('/metrics', async (_request, reply) => {
    reply.type(aggregator.contentType);
    return aggregator.clusterMetrics();
  });
  admin.get('/healthz', () => {
    const pids = live().map((w) => w.process.pid);
    return { status: 'ok', workers: pids.length, pids };
  });
  const forward = (request: FastifyRequest, reply: FastifyReply) =>
    forwardToWorkers(request, reply, relay, live());
  admin.all('/', forward);
  admin.all('/*', forward);
  return admin;
}

/** A read goes to one worker; a change, and /readyz, to every worker. */
async function forwardToWorkers(
  request: FastifyRequest,
  reply: FastifyReply,
  relay: AdminRelay,
  workers: Worker[],
) {
  if (workers.length === 0) {
    return send(reply, problemResponse(503, 'Service Unavailable', 'no gateway worker is running'));
  }
  const adminRequest: AdminRequest = {
    method: request.method,
    url: request.raw.url ?? '/',
    headers: request.headers,
    body: typeof request.body === 'string' ? request.body : '',
  };
  const reads = request.method === 'GET' || request.method === 'HEAD';
  const everyWorker = !reads || request.routeOptions.url === '/readyz';
  if (!everyWorker) return send(reply, await relay.ask(workers[0]!, adminRequest));
  const answers = await Promise.all(workers.map((w) => relay.ask(w, adminRequest)));
  return send(reply, oneAnswer(answers, workers));
}

/** The workers' common answer; when they disagree (one not ready, one refused a change), say so. */
function oneAnswer(answers: AdminResponse[], workers: Worker[]): AdminResponse {
  const first = answers[0]!;
  if (answers.every((a) => a.status === first.status)) return first;
  const worst = answers.reduce((a, b) => (b.status > a.status ? b : a));
  return {
    ...worst,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      detail: 'the gateway workers answered differently',
      workers: answers.map((a, i) => ({
        pid: workers[i]!.process.pid,
        status: a.status,
        body: a.body,
      })),
    }),
  };
}

function problemResponse(status: number, title: string, detail: string): AdminResponse {
  return {
    status,
    headers: { 'content-type': 'application/problem+json' },
    body: JSON.stringify({ type: 'about:blank', title, status, detail }),
  };
}

const SET_BY_LISTENER = new Set(['content-length', 'connection', 'transfer-encoding', 'date']);

/** A worker's answer as it was, less the headers the primary's own listener sets. */
function send(reply: FastifyReply, response: AdminResponse) {
  const headers = Object.fromEntries(
    Object.entries(response.headers).filter(([name]) => !SET_BY_LISTENER.has(name)),
  );
  return reply.code(response.status).headers(headers).send(response.body);
}
