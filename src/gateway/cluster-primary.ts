/**
 * The primary of a multi-worker gateway (node:cluster): it forks the workers, which share the
 * public port and do all the proxying, and holds the one admin listener. /metrics sums the
 * workers (prom-client's cluster aggregator); /healthz answers for the primary; every other
 * admin request is answered by the workers' own admin routes over IPC, so the token is
 * decided there, on the matched route, exactly as with one process. A change (any method but
 * GET/HEAD) goes to every worker, since each holds its own policy and pressure board.
 */
import cluster from 'node:cluster';
import type { Worker } from 'node:cluster';
import Fastify from 'fastify';
import type { FastifyBaseLogger, FastifyReply, FastifyRequest } from 'fastify';
import { AggregatorRegistry } from 'prom-client';
import type { GatewayConfig } from '../config/schema.js';
import { isMessage } from './cluster-messages.js';
import type { ToPrimary, ToWorker } from './cluster-messages.js';
import type { AdminRequest, AdminResponse } from './server.js';

const ADMIN_TIMEOUT_MS = 10_000;
/** A worker that dies sooner than this after its start counts as failing to start. */
const QUICK_DEATH_MS = 10_000;
const MAX_RESTART_DELAY_MS = 10_000;

export interface RunningPrimary {
  url: string;
  adminUrl: string;
  /** Pids of the workers now running. */
  workerPids(): number[];
  /** Tell every worker to reload its configuration file. */
  reload(): void;
  /** Stop every worker gracefully (SIGKILL after the grace), then the admin listener. */
  close(): Promise<void>;
}

export async function startPrimary(
  config: GatewayConfig,
  count: number,
  log: FastifyBaseLogger,
): Promise<RunningPrimary> {
  const aggregator = new AggregatorRegistry();
  const pending = new Map<number, (response: AdminResponse) => void>();
  let nextId = 1;
  let stopping = false;
  let quickDeaths = 0;

  const live = () => Object.values(cluster.workers ?? {}).filter((w): w is Worker => !!w);

  function onMessage(message: unknown): void {
    if (
      isMessage<Extract<ToPrimary, { type: 'sluice:admin-response' }>>(
        message,
        'sluice:admin-response',
      )
    ) {
      pending.get(message.id)?.(message.response);
      pending.delete(message.id);
    }
  }

  /** Fork one worker; resolves with the public URL once it listens, rejects if it dies first. */
  function fork(): Promise<string> {
    const worker = cluster.fork();
    const startedAt = Date.now();
    worker.on('message', onMessage);
    const ready = new Promise<string>((resolve, reject) => {
      worker.on('message', (m: unknown) => {
        if (isMessage<Extract<ToPrimary, { type: 'sluice:ready' }>>(m, 'sluice:ready'))
          resolve(m.url);
      });
      worker.once('exit', (code, signal) =>
        reject(
          new Error(
            `worker ${worker.process.pid} ${signal ?? `exited with ${code}`} before it was ready`,
          ),
        ),
      );
    });
    worker.once('exit', (code, signal) => {
      if (stopping) return;
      const quick = Date.now() - startedAt < QUICK_DEATH_MS;
      quickDeaths = quick ? quickDeaths + 1 : 0;
      const delay = quick ? Math.min(MAX_RESTART_DELAY_MS, 250 * 2 ** quickDeaths) : 0;
      log.error(
        { pid: worker.process.pid, code, signal, restartInMs: delay },
        'gateway worker died; starting another',
      );
      setTimeout(() => {
        if (!stopping)
          fork().catch((err: Error) => log.error({ err: err.message }, 'worker restart failed'));
      }, delay).unref();
    });
    return ready;
  }

  function ask(worker: Worker, request: AdminRequest): Promise<AdminResponse> {
    const id = nextId++;
    return new Promise<AdminResponse>((resolve) => {
      const timer = setTimeout(() => {
        pending.delete(id);
        resolve(
          problemResponse(504, 'Gateway Timeout', `worker ${worker.process.pid} did not answer`),
        );
      }, ADMIN_TIMEOUT_MS);
      pending.set(id, (response) => {
        clearTimeout(timer);
        resolve(response);
      });
      const message: ToWorker = { type: 'sluice:admin', id, request };
      worker.send(message);
    });
  }

  async function forward(request: FastifyRequest, reply: FastifyReply) {
    const workers = live();
    if (workers.length === 0) {
      return send(
        reply,
        problemResponse(503, 'Service Unavailable', 'no gateway worker is running'),
      );
    }
    const adminRequest: AdminRequest = {
      method: request.method,
      url: request.raw.url ?? '/',
      headers: request.headers,
      body: typeof request.body === 'string' ? request.body : '',
    };
    const reads = request.method === 'GET' || request.method === 'HEAD';
    const everyWorker = !reads || request.routeOptions.url === '/readyz';
    if (!everyWorker) return send(reply, await ask(workers[0]!, adminRequest));
    const answers = await Promise.all(workers.map((w) => ask(w, adminRequest)));
    const first = answers[0]!;
    if (answers.every((a) => a.status === first.status)) return send(reply, first);
    // Workers disagree (one not ready, one refused a change): say so rather than pick one.
    const worst = answers.reduce((a, b) => (b.status > a.status ? b : a));
    return send(reply, {
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
    });
  }

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
  admin.all('/', forward);
  admin.all('/*', forward);

  let url: string;
  try {
    const urls = await Promise.all(Array.from({ length: count }, () => fork()));
    url = urls[0]!;
    await admin.listen({ host: config.admin.host, port: config.admin.port });
  } catch (err) {
    stopping = true;
    for (const w of live()) w.process.kill('SIGKILL');
    await admin.close();
    throw err;
  }
  const address = admin.server.address();
  const port = typeof address === 'object' && address ? address.port : config.admin.port;
  const host = config.admin.host.includes(':') ? `[${config.admin.host}]` : config.admin.host;

  return {
    url,
    adminUrl: `http://${host}:${port}`,
    workerPids: () => live().map((w) => w.process.pid!),
    reload() {
      const message: ToWorker = { type: 'sluice:reload' };
      for (const w of live()) w.send(message);
    },
    async close() {
      stopping = true;
      const workers = live();
      const exited = workers.map(
        (w) =>
          new Promise<void>((resolve) =>
            w.process.exitCode !== null ? resolve() : w.once('exit', () => resolve()),
          ),
      );
      for (const w of workers) w.process.kill('SIGTERM');
      const force = setTimeout(() => {
        for (const w of workers) if (w.process.exitCode === null) w.process.kill('SIGKILL');
      }, config.shutdownGraceMs + 1000);
      await Promise.all(exited);
      clearTimeout(force);
      await admin.close();
    },
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
