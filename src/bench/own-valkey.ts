import path from 'node:path';
import { runDir } from '../harness/paths.js';
import { freeLoopbackPort } from '../harness/ports.js';
import type { NodeAddress } from '../store/index.js';
import { startInstance, stopInstance } from '../valkey/embedded.js';

/**
 * Run a benchmark with its own run directory (<run dir>/<name>) and the Valkey it was given,
 * else a standalone one of its own on a free port, started first and stopped after `run`.
 */
export async function withBenchValkey<T>(
  name: string,
  given: NodeAddress | undefined,
  log: (line: string) => void,
  run: (valkey: NodeAddress, env: NodeJS.ProcessEnv) => Promise<T>,
): Promise<T> {
  const env = { ...process.env, SLUICE_RUN_DIR: path.join(runDir(), name) };
  const quiet = { info: () => undefined, warn: log };
  const own = given
    ? undefined
    : { topology: 'standalone' as const, port: await freeLoopbackPort() };
  try {
    if (own) await startInstance(own, quiet, env);
    return await run(given ?? { host: '127.0.0.1', port: own!.port }, env);
  } finally {
    if (own) await stopInstance(own, quiet, env);
  }
}
