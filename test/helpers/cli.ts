import { spawnSync } from 'node:child_process';
import { isLive } from '../../src/valkey/server.js';
import { CLI } from '../../src/harness/processes.js';

export { CLI };

export interface CliResult {
  status: number | null;
  stdout: string;
  stderr: string;
}

/** Run `sluice <args>` as a user would, in its own process. */
export function sluice(args: string[], env: NodeJS.ProcessEnv, timeoutMs = 60_000): CliResult {
  const result = spawnSync(process.execPath, [CLI, ...args], {
    env,
    encoding: 'utf8',
    timeout: timeoutMs,
  });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

/** True while a process with this PID exists and is not a zombie. */
export const isAlive = isLive;
