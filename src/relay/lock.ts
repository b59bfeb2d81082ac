import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';

export class DataDirInUseError extends Error {
  override name = 'DataDirInUseError';
}

/**
 * Claim a data directory for this process (a pid file), so two relays never append to one
 * file. A pid file left by a process that is gone (or is no longer a relay) is taken over.
 * Returns the function that releases the claim.
 */
export function claimDataDir(dir: string): () => void {
  const file = path.join(dir, 'relay.pid');
  try {
    writeFileSync(file, `${process.pid}\n`, { flag: 'wx' });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    const other = holder(file);
    if (other !== undefined && other !== process.pid) {
      throw new DataDirInUseError(`data directory ${dir} is in use by relay pid ${other}`);
    }
    writeFileSync(file, `${process.pid}\n`);
  }
  return () => {
    if (holder(file) === process.pid) rmSync(file, { force: true });
  };
}

/** The live relay process named by the pid file, if any. */
function holder(file: string): number | undefined {
  let pid: number;
  try {
    pid = Number(readFileSync(file, 'utf8').trim());
  } catch {
    return undefined;
  }
  if (!Number.isInteger(pid) || pid <= 0) return undefined;
  try {
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    return cmdline.includes('relay') ? pid : undefined;
  } catch {
    return undefined;
  }
}
