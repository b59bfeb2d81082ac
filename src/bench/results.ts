import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PROJECT_ROOT } from '../harness/paths.js';

/** results/<YYYYMMDD_HHMMSS> (UTC) inside the project. */
export function defaultResultsDir(now = new Date()): string {
  const stamp = now.toISOString().replace(/[-:]/g, '').replace('T', '_').slice(0, 15);
  return path.join(PROJECT_ROOT, 'results', stamp);
}

/**
 * A benchmark's end on the command line: its result file (`name`, else <kind>.json) written
 * into `outDir`, else a new results/<stamp>, then its table and the file's path printed.
 * Returns the file.
 */
export function showResult(
  outDir: string | undefined,
  kind: string,
  payload: Record<string, unknown>,
  table: string,
  name = `${kind}.json`,
): string {
  const file = writeResult(outDir ?? defaultResultsDir(), name, kind, payload);
  console.log(table);
  console.log(`\nresults: ${file}`);
  return file;
}

/** Write one benchmark's result file, with the date and the machine it ran on. */
export function writeResult(
  outDir: string,
  name: string,
  kind: string,
  payload: Record<string, unknown>,
): string {
  mkdirSync(outDir, { recursive: true });
  const file = path.join(outDir, name);
  const machine = {
    cpus: os.cpus().length,
    cpuModel: os.cpus()[0]?.model,
    memGiB: os.totalmem() / 2 ** 30,
    node: process.version,
  };
  writeFileSync(
    file,
    JSON.stringify({ kind, date: new Date().toISOString(), machine, ...payload }, null, 2),
  );
  return file;
}
