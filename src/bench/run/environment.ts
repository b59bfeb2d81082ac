/** The machine and the software versions a result was measured with. */
import os from 'node:os';
import path from 'node:path';
import { openNodeConnection } from '../../store/node.js';
import type { NodeAddress } from '../../store/options.js';
import { CLIENTS } from '../../store/clients/registry.js';
import { parseInfo } from '../../valkey/cluster.js';
import { PROJECT_ROOT, packageVersion } from '../../harness/paths.js';

const PACKAGES = [
  'rate-limiter-flexible',
  ...Object.values(CLIENTS).map((c) => c.package),
  'fastify',
  '@fastify/reply-from',
  '@fastify/rate-limit',
  'ws',
  'autocannon',
];

export function machine() {
  return {
    cpus: os.cpus().length,
    cpuModel: os.cpus()[0]?.model ?? 'unknown',
    memGiB: Number((os.totalmem() / 2 ** 30).toFixed(1)),
    kernel: `${os.type()} ${os.release()}`,
    node: process.version,
  };
}

export async function versions(valkey?: NodeAddress): Promise<Record<string, string>> {
  const out: Record<string, string> = { sluice: packageVersion(PROJECT_ROOT) ?? 'unknown' };
  for (const name of PACKAGES) {
    out[name] = packageVersion(path.join(PROJECT_ROOT, 'node_modules', name)) ?? 'not installed';
  }
  if (valkey) {
    try {
      const conn = await openNodeConnection(valkey);
      try {
        const info = parseInfo(String(await conn.call('INFO', 'server')));
        out.valkey = info.valkey_version ?? `redis ${info.redis_version}`;
      } finally {
        conn.close();
      }
    } catch (err) {
      out.valkey = `unreachable (${(err as Error).message})`;
    }
  }
  return out;
}

export async function environment(valkey?: NodeAddress) {
  return { machine: machine(), versions: await versions(valkey) };
}
