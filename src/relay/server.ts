import { mkdirSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { WebSocketServer } from 'ws';
import { DataFile } from './datafile.js';
import { Flusher } from './flusher.js';
import { buildHttp } from './http.js';
import type { RelayLimits } from './http.js';
import { IndexStore } from './index-store.js';
import { claimDataDir } from './lock.js';
import { Memtable } from './memtable.js';
import { createMetrics } from './metrics.js';
import type { RelayStats } from './metrics.js';
import { NostrSockets } from './nostr-ws.js';
import { processMemory } from './proc.js';
import { SpikeManager } from './spike.js';
export {
  DEFAULT_DRAIN_BYTES_PER_SEC,
  DEFAULT_MAX_EVENT_BYTES,
  defaultDataDir,
} from './defaults.js';
import { EventStore } from './store.js';

export interface SpikePlan {
  bytes: number;
  everyMs: number;
  holdMs: number;
}

export interface RelayConfig {
  host: string;
  /** 0 picks a free port. */
  port: number;
  nodeId: string;
  dataDir: string;
  /** What NIP-11 and /health report as the software's version (the caller knows its package). */
  version: string;
  /** Start from an empty data file instead of reloading an earlier run's events. */
  fresh: boolean;
  drainBytesPerSec: number;
  workIterations: number;
  maxEventBytes: number;
  /** false: signatures are not checked (`--no-verify-signatures`, for tests). */
  verifySignatures?: boolean;
  spike?: SpikePlan;
  /** Bearer token of /admin/spike and /admin/drain; without one they are disabled (404). */
  adminToken?: string;
  /** NIP-42 on: the URL clients reach the relay by, checked against AUTH events' relay tag. */
  publicUrl?: string;
}

export interface RunningRelay {
  /** http://host:port; the WebSocket URL is the same with ws://. */
  url: string;
  port: number;
  nodeId: string;
  /** Events found in the data file at start. */
  reloadedEvents: number;
  /** Close sockets (1001), stop the flusher, write out the backlog, close the servers. */
  close(): Promise<void>;
}

const log = (message: string) => console.error(message);

export async function startRelay(config: RelayConfig): Promise<RunningRelay> {
  const started = performance.now();
  mkdirSync(config.dataDir, { recursive: true });
  const unclaim = claimDataDir(config.dataDir);
  const file = await DataFile.open(config.dataDir, config.fresh);
  if (file.truncatedBytes > 0) {
    log(`relay ${config.nodeId}: cut an incomplete last record (${file.truncatedBytes} bytes)`);
  }
  const memtable = new Memtable(file.size);
  const limits: RelayLimits = {
    maxEventBytes: config.maxEventBytes,
    // Room for the frame around the event and JSON escaping the canonical form may undo.
    maxMessageBytes: Math.max(2 * config.maxEventBytes, 64 * 1024),
    maxLimit: 500,
    maxSubscriptions: 64,
    maxFilters: 16,
  };
  const index = new IndexStore(memtable, file, limits.maxLimit);
  const scan = await file.scan((meta) => index.add(meta));
  if (scan.skipped > 0) log(`relay ${config.nodeId}: skipped ${scan.skipped} unreadable lines`);

  const store = new EventStore(index, memtable, {
    maxEventBytes: config.maxEventBytes,
    workIterations: config.workIterations,
    verifySignatures: config.verifySignatures !== false,
  });
  const flusher = new Flusher(memtable, file, config.drainBytesPerSec, (err) =>
    log(
      `relay ${config.nodeId}: flush failed: ${err instanceof Error ? err.message : String(err)}`,
    ),
  );
  const spikes = new SpikeManager();
  const sockets = new NostrSockets(
    store,
    index,
    limits,
    config.publicUrl ? { publicUrl: config.publicUrl } : undefined,
  );

  const stats = (): RelayStats => {
    const memory = processMemory();
    return {
      nodeId: config.nodeId,
      pid: process.pid,
      uptimeSeconds: (performance.now() - started) / 1000,
      rssBytes: memory.rssBytes,
      rssAnonBytes: memory.rssAnonBytes,
      heapUsedBytes: process.memoryUsage().heapUsed,
      memtableBytes: memtable.heldBytes,
      memtableSlabs: memtable.slabCount,
      backlogBytes: memtable.backlogBytes,
      backlogEvents: index.backlogEvents(),
      drainRateBytesPerSec: flusher.rateBytesPerSec,
      drainedBytesPerSec: Math.round(flusher.drainedBytesPerSec()),
      flushedBytes: flusher.flushedBytes,
      flushErrors: flusher.errors,
      dataFileBytes: file.size,
      eventsStored: index.size,
      eventsAccepted: store.accepted,
      eventsDuplicate: store.duplicates,
      eventsRejected: { ...store.rejected },
      spikeBytes: spikes.heldBytes,
      spikesTotal: spikes.count,
      connections: sockets.connectionCount,
      subscriptions: sockets.subscriptionCount,
      workIterations: config.workIterations,
      workDigest: store.workDigest.toString('hex'),
    };
  };
  const metrics = createMetrics(config.nodeId, stats);
  const app = buildHttp({
    nodeId: config.nodeId,
    version: config.version,
    limits,
    store,
    index,
    flusher,
    spikes,
    metrics,
    stats,
    adminToken: config.adminToken,
  });

  // WebSocket on the same port: ws takes the upgrade requests Fastify's server does not serve.
  const wss = new WebSocketServer({ noServer: true, maxPayload: limits.maxMessageBytes });
  wss.on('connection', (ws) => sockets.handle(ws));
  let closing: Promise<void> | undefined;
  app.server.on('upgrade', (request, socket, head) => {
    socket.on('error', () => socket.destroy());
    // The path only, read as a path: "//a%2Fb" must not be taken for a host (URL would throw).
    const pathname = (request.url ?? '/').split('?')[0];
    if (closing) {
      socket.end('HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\n\r\n');
      return;
    }
    if (pathname !== '/') {
      socket.end('HTTP/1.1 404 Not Found\r\nConnection: close\r\n\r\n');
      return;
    }
    wss.handleUpgrade(request, socket, head, (ws) => wss.emit('connection', ws, request));
  });

  try {
    await app.listen({ host: config.host, port: config.port });
  } catch (err) {
    await file.close();
    unclaim();
    throw err;
  }
  flusher.start();
  if (config.spike) {
    const { bytes, everyMs, holdMs } = config.spike;
    spikes.startPeriodic(bytes, everyMs, holdMs, (err) =>
      log(
        `relay ${config.nodeId}: spike failed: ${err instanceof Error ? err.message : String(err)}`,
      ),
    );
  }

  const address = app.server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return {
    url: `http://${host}:${address.port}`,
    port: address.port,
    nodeId: config.nodeId,
    reloadedEvents: scan.records,
    close: () =>
      (closing ??= (async () => {
        await sockets.closeAll(1001, 'relay shutting down');
        wss.close();
        await app.close();
        spikes.stop();
        await flusher.stop();
        await flusher.flushAll();
        memtable.releaseAll();
        await file.close();
        unclaim();
      })()),
  };
}
