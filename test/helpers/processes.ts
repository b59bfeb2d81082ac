import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after } from 'node:test';
import {
  spawnSluice as spawnChild,
  startFeed as startFeedProcess,
  startRelay as startRelayProcess,
} from '../../src/harness/processes.js';
import type { SluiceProcess } from '../../src/harness/processes.js';
import type { ClientKind, Topology } from '../../src/store/index.js';
import { nodesFor } from './env.js';
// A file the runner times out still stops the children spawned here.
import './signals.js';

export type { SluiceProcess };

/** Processes this test file started and has not stopped yet. */
const live = new Set<SluiceProcess>();

// After the file's last test, pass or fail, stop whatever is still running. A failed
// assertion skips the stop() at the end of its test (or in a hook that threw first), and
// a child left running keeps its pipes open: the file's process would then never exit.
after(async () => {
  await Promise.allSettled([...live].map((p) => p.stop()));
});

/** `sluice <args>` in the background (see src/harness/processes.ts), stopped after the file. */
export async function spawnSluice(
  args: string[],
  opts?: Parameters<typeof spawnChild>[1],
): Promise<SluiceProcess> {
  return stoppedAfterFile(await spawnChild(args, opts));
}

/** The process, stopped after the file's last test unless stopped before. */
export function stoppedAfterFile(proc: SluiceProcess): SluiceProcess {
  live.add(proc);
  return {
    ...proc,
    stop: async (signal) => {
      try {
        return await proc.stop(signal);
      } finally {
        live.delete(proc);
      }
    },
  };
}

/**
 * Stop every process given, whichever are set and whatever each one's stop does: one
 * that fails or was never started does not leave the others running.
 */
export async function stopAll(
  ...procs: ({ stop(): Promise<unknown> } | undefined)[]
): Promise<void> {
  const results = await Promise.allSettled(procs.map(async (p) => p?.stop()));
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason;
}

export interface RelayProcess extends SluiceProcess {
  nodeId: string;
  /** The relay's private --data-dir (removed when the relay is stopped). */
  dataDir: string;
}

/** Temporary data directories, removed when the test process exits. */
const scratchDirs = new Set<string>();
process.once('exit', () => {
  for (const dir of scratchDirs) rmSync(dir, { recursive: true, force: true });
});

/** The admin token test relays get unless told otherwise (see relayAdminHeaders). */
export const RELAY_ADMIN_TOKEN = 'test-relay-admin-token-0123456789';

/** Headers for the reference relay's /admin/spike and /admin/drain. */
export function relayAdminHeaders(token = RELAY_ADMIN_TOKEN): Record<string, string> {
  return { authorization: `Bearer ${token}` };
}

/**
 * A reference relay on a free loopback port with its own temporary data directory. Its
 * admin endpoints take RELAY_ADMIN_TOKEN, another `adminToken`, or none (`null`: disabled).
 */
export async function startRelay(opts: {
  nodeId: string;
  drainBytesPerSec?: number;
  extraArgs?: string[];
  adminToken?: string | null;
}): Promise<RelayProcess> {
  const dataDir = mkdtempSync(path.join(tmpdir(), `sluice-relay-${opts.nodeId}-`));
  scratchDirs.add(dataDir);
  const env = { ...process.env, SLUICE_RELAY_ADMIN_TOKEN: '' };
  const adminToken = opts.adminToken === undefined ? RELAY_ADMIN_TOKEN : opts.adminToken;
  if (adminToken !== null) env.SLUICE_RELAY_ADMIN_TOKEN = adminToken;
  let proc: SluiceProcess;
  try {
    proc = stoppedAfterFile(await startRelayProcess({ ...opts, dataDir, env }));
  } catch (err) {
    rmSync(dataDir, { recursive: true, force: true });
    scratchDirs.delete(dataDir);
    throw err;
  }
  return {
    ...proc,
    nodeId: opts.nodeId,
    dataDir,
    stop: async (signal) => {
      const code = await proc.stop(signal);
      rmSync(dataDir, { recursive: true, force: true });
      scratchDirs.delete(dataDir);
      return code;
    },
  };
}

/** `sluice feed` for a reference relay, publishing through the suite's Valkey. */
export async function startFeed(opts: {
  nodeId: string;
  relayUrl: string;
  targetBytes: number | string;
  tickMs: number;
  client: ClientKind;
  mode: Topology;
  /** Resume from the estimate saved in Valkey (by default a test's feed forgets it). */
  keepLearned?: boolean;
}): Promise<SluiceProcess> {
  const nodes = nodesFor(opts.mode).map((n) => `${n.host}:${n.port}`);
  return stoppedAfterFile(
    await startFeedProcess({ ...opts, valkey: { client: opts.client, mode: opts.mode, nodes } }),
  );
}
