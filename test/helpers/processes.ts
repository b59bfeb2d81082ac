import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { spawnSluice } from '../../src/bench/processes.js';
import type { SluiceProcess } from '../../src/bench/processes.js';
import type { ClientKind, Topology } from '../../src/store/index.js';
import { nodesFor } from './env.js';

export { spawnSluice };
export type { SluiceProcess };

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

/** A reference relay on a free loopback port with its own temporary data directory. */
export async function startRelay(opts: {
  nodeId: string;
  drainBytesPerSec?: number;
  extraArgs?: string[];
}): Promise<RelayProcess> {
  const dataDir = mkdtempSync(path.join(tmpdir(), `sluice-relay-${opts.nodeId}-`));
  scratchDirs.add(dataDir);
  const args = ['relay', '--port', '0', '--node-id', opts.nodeId, '--data-dir', dataDir];
  if (opts.drainBytesPerSec !== undefined) {
    args.push('--drain-bytes-per-sec', String(opts.drainBytesPerSec));
  }
  let proc: SluiceProcess;
  try {
    proc = await spawnSluice([...args, ...(opts.extraArgs ?? [])]);
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
export function startFeed(opts: {
  nodeId: string;
  relayUrl: string;
  targetBytes: number | string;
  tickMs: number;
  client: ClientKind;
  mode: Topology;
}): Promise<SluiceProcess> {
  return spawnSluice([
    'feed',
    '--node-id',
    opts.nodeId,
    '--relay',
    opts.relayUrl,
    '--target-bytes',
    String(opts.targetBytes),
    '--tick-ms',
    String(opts.tickMs),
    '--valkey-client',
    opts.client,
    '--valkey-mode',
    opts.mode,
    '--valkey-nodes',
    nodesFor(opts.mode)
      .map((n) => `${n.host}:${n.port}`)
      .join(','),
  ]);
}
