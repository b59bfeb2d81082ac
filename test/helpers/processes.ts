import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { spawnSluice } from '../../src/bench/processes.js';
import type { SluiceProcess } from '../../src/bench/processes.js';

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
