/**
 * The relay under an OOM run, restartable: the same port and data directory each time (a
 * supervisor's restart after a kill, and the read-back once the run is over), inside the
 * memory cgroup when one is given.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freeLoopbackPort } from '../../harness/ports.js';
import { startRelay } from '../../harness/processes.js';
import type { ProcessExit } from '../../harness/processes.js';
import type { RelayImpl, ThirdPartyImpl } from '../run/config.js';
import { thirdPartyRelay } from '../run/third-party-relays.js';
import { WebSocket } from 'ws';

export interface RelayUnderTest {
  pid: number;
  /** http://127.0.0.1:<port>: the gateways' upstream. */
  url: string;
  exited: Promise<ProcessExit>;
  /** A graceful stop (the reference relay writes out its backlog), SIGKILL after a grace. */
  stop(): Promise<ProcessExit>;
  output(): string;
}

export interface OomRelay {
  impl: RelayImpl;
  nodeId: string;
  /** HTTP writes (the reference relay) or WebSocket EVENTs (a Nostr-only relay). */
  transport: 'http' | 'websocket';
  /** Gateway settings this relay needs (e.g. a health check path). */
  gatewayExtra: Record<string, unknown>;
  /** Start it (again), on its port and data, inside the group whose cgroup.procs is given. */
  start(procsFile?: string): Promise<RelayUnderTest>;
  /** Which of `ids` the running relay at `url` holds, read through its own API. */
  readBack(url: string, ids: string[]): Promise<Set<string>>;
  /** Remove its data. */
  dispose(): void;
}

/** Ids per read-back query: the query string stays well under Node's 16 KiB header bound. */
const READ_BATCH = 100;

/** The ids of `ids` the reference relay returns from GET /events?ids=... */
/** A started relay process as the benchmark drives it: its stop resolves once it is gone. */
function underTest(
  proc: Omit<RelayUnderTest, 'stop'> & { stop(): Promise<unknown> },
): RelayUnderTest {
  return {
    pid: proc.pid,
    url: proc.url,
    exited: proc.exited,
    stop: async () => {
      await proc.stop();
      return proc.exited;
    },
    output: () => proc.output(),
  };
}

export async function readBackHttp(url: string, ids: string[]): Promise<Set<string>> {
  const found = new Set<string>();
  for (let i = 0; i < ids.length; i += READ_BATCH) {
    const batch = ids.slice(i, i + READ_BATCH);
    const res = await fetch(`${url}/events?ids=${batch.join(',')}&limit=${batch.length}`, {
      signal: AbortSignal.timeout(30_000),
    });
    if (!res.ok) throw new Error(`read-back: GET ${url}/events answered ${res.status}`);
    for (const event of (await res.json()) as { id: string }[]) found.add(event.id);
  }
  return found;
}

export async function referenceRelay(o: {
  drainBytesPerSec: number;
  maxEventBytes: number;
  env: NodeJS.ProcessEnv;
}): Promise<OomRelay> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'sluice-oom-relay-'));
  const port = await freeLoopbackPort();
  let first = true;
  return {
    impl: 'reference',
    nodeId: 'relay-a',
    transport: 'http',
    gatewayExtra: {},
    async start(procsFile) {
      const proc = await startRelay({
        nodeId: 'relay-a',
        dataDir,
        port,
        fresh: first,
        drainBytesPerSec: o.drainBytesPerSec,
        extraArgs: ['--max-event-bytes', String(o.maxEventBytes)],
        cgroupProcs: procsFile,
        env: o.env,
      });
      first = false;
      return underTest(proc);
    },
    readBack: readBackHttp,
    dispose: () => rmSync(dataDir, { recursive: true, force: true }),
  };
}

/** Ids per read-back REQ. */
const REQ_BATCH = 200;

/** The ids of `ids` a Nostr relay returns to REQ {ids} (each REQ answered up to its EOSE). */
export async function readBackNostr(wsUrl: string, ids: string[]): Promise<Set<string>> {
  const found = new Set<string>();
  const ws = new WebSocket(wsUrl, { perMessageDeflate: false, handshakeTimeout: 10_000 });
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  try {
    for (let i = 0; i < ids.length; i += REQ_BATCH) {
      const batch = ids.slice(i, i + REQ_BATCH);
      const sub = `readback-${i}`;
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`read-back: no EOSE for ${sub}`)), 60_000);
        const onMessage = (data: Buffer) => {
          const msg = JSON.parse(data.toString('utf8')) as unknown[];
          if (msg[1] !== sub) return;
          if (msg[0] === 'EVENT') found.add((msg[2] as { id: string }).id);
          else if (msg[0] === 'EOSE' || msg[0] === 'CLOSED') {
            clearTimeout(timer);
            ws.off('message', onMessage);
            if (msg[0] === 'CLOSED')
              reject(new Error(`read-back: ${sub} closed: ${String(msg[2])}`));
            else resolve();
          }
        };
        ws.on('message', onMessage);
        ws.send(JSON.stringify(['REQ', sub, { ids: batch, limit: batch.length }]));
      });
      ws.send(JSON.stringify(['CLOSE', sub]));
    }
  } finally {
    ws.terminate();
  }
  return found;
}

/**
 * A third-party relay (built and cached on first use), with its database in its own directory
 * (nostr-rs-relay's SQLite, the khatru relay's badger).
 */
export async function thirdPartyOomRelay(o: {
  impl: ThirdPartyImpl;
  env: NodeJS.ProcessEnv;
  log: (line: string) => void;
}): Promise<OomRelay> {
  const kind = thirdPartyRelay(o.impl);
  const workDir = mkdtempSync(path.join(os.tmpdir(), `sluice-oom-${o.impl}-`));
  const port = await freeLoopbackPort();
  return {
    impl: o.impl,
    nodeId: kind.label(),
    transport: 'websocket',
    // A third-party relay has no /healthz: its root answers a plain GET with 200.
    gatewayExtra: { healthCheck: { path: '/' } },
    async start(procsFile) {
      const relay = await kind.start(workDir, o.log, o.env, {
        port,
        cgroupProcs: procsFile,
      });
      return underTest(relay);
    },
    readBack: (url, ids) => readBackNostr(url.replace(/^http/, 'ws'), ids),
    dispose: () => rmSync(workDir, { recursive: true, force: true }),
  };
}
