import path from 'node:path';

/** Defaults of `sluice relay`, apart from the server so the CLI can show them cheaply. */
export const DEFAULT_DRAIN_BYTES_PER_SEC = 1024 * 1024;
export const DEFAULT_MAX_EVENT_BYTES = 128 * 1024;

/** The default data directory: one folder per node under the run directory. */
export function defaultDataDir(runDir: string, nodeId: string): string {
  return path.join(runDir, 'relay', nodeId);
}
