/**
 * The primary of a multi-worker gateway (node:cluster): it forks the workers, which do all the
 * proxying, holds the public port and hands each client's socket to the worker its address
 * hashes to (sticky-dispatch.ts: per-address limits hold per gateway), and holds the one admin
 * listener (cluster-admin.ts).
 */
import type { Server } from 'node:net';
import type { FastifyBaseLogger } from 'fastify';
import type { GatewayConfig } from '../config/schema.js';
import { ClientAddress } from './client-address.js';
import { AdminRelay, buildPrimaryAdmin } from './cluster-admin.js';
import { ClusterWorkers } from './cluster-workers.js';
import { createStickyListener } from './sticky-dispatch.js';

export interface RunningPrimary {
  url: string;
  adminUrl: string;
  /** Pids of the workers now running. */
  workerPids(): number[];
  /** Tell every worker to reload its configuration file. */
  reload(): void;
  /** Stop accepting, stop every worker gracefully (SIGKILL after the grace), then the admin listener. */
  close(): Promise<void>;
}

export async function startPrimary(
  config: GatewayConfig,
  count: number,
  log: FastifyBaseLogger,
): Promise<RunningPrimary> {
  const relay = new AdminRelay();
  const workers = new ClusterWorkers(count, log, relay.onMessage);
  const admin = buildPrimaryAdmin(log, relay, () => workers.live());
  const listener = publicListener(config, workers, log);
  try {
    await workers.start();
    await listen(listener, config.listen);
    await admin.listen({ host: config.admin.host, port: config.admin.port });
  } catch (err) {
    workers.kill();
    listener.close();
    await admin.close();
    throw err;
  }
  return {
    url: urlOf(listener, config.listen),
    adminUrl: urlOf(admin.server, config.admin),
    workerPids: () => workers.live().map((w) => w.process.pid!),
    reload: () => workers.send({ type: 'sluice:reload' }),
    async close() {
      listener.close();
      await workers.stop(config.shutdownGraceMs + 1000);
      await admin.close();
    },
  };
}

/** The public port, held by the primary: each socket goes to its address's worker. */
function publicListener(
  config: GatewayConfig,
  workers: ClusterWorkers,
  log: FastifyBaseLogger,
): Server {
  const address = new ClientAddress(config.trustedProxies, {
    ipv6PrefixLength: config.identity.ipv6PrefixLength,
  });
  const server = createStickyListener({
    address,
    peekTimeoutMs: config.limits.headersTimeoutMs,
    handOver: (key, handover) => workers.handOver(key, handover),
  });
  // Accepting can fail once listening (EMFILE): the listener goes on with the next client.
  server.on('error', (err) => log.error({ err }, 'public listener error'));
  return server;
}

function listen(server: Server, at: { host: string; port: number }): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host: at.host, port: at.port }, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

function urlOf(server: Server, at: { host: string; port: number }): string {
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : at.port;
  return `http://${at.host.includes(':') ? `[${at.host}]` : at.host}:${port}`;
}
