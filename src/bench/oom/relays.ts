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
import type { RelayImpl } from '../run/config.js';

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
    },
    readBack: readBackHttp,
    dispose: () => rmSync(dataDir, { recursive: true, force: true }),
  };
}
