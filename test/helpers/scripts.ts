import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { RunResult } from '../../src/bench/run/runner.js';
import { PROJECT_ROOT } from '../../src/harness/paths.js';
import './signals.js';

/** Scripts still running; told to stop (their EXIT trap stops what they started) on exit. */
const scripts = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of scripts) child.kill('SIGTERM');
});

/**
 * `scripts/<name>` with `args`, its environment this process's plus `env`, set-up skipped
 * (the suite has built and installed), and the test Valkeys as run-benchmark.sh takes them.
 * Resolves with its exit status and its output, stdout and stderr interleaved.
 */
export function runScript(
  name: string,
  args: string[],
  env: Record<string, string>,
): Promise<{ status: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(path.join(PROJECT_ROOT, 'scripts', name), args, {
      env: {
        ...process.env,
        SLUICE_SKIP_SETUP: '1',
        VALKEY_STANDALONE: process.env.SLUICE_TEST_STANDALONE ?? '',
        VALKEY_CLUSTER: process.env.SLUICE_TEST_CLUSTER ?? '',
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    scripts.add(child);
    child.on('exit', (status) => {
      scripts.delete(child);
      resolve({ status, output });
    });
  });
}

/** A run's result file, as run-benchmark.sh wrote it. */
export function readRunResult(file: string): RunResult {
  return JSON.parse(readFileSync(file, 'utf8')) as RunResult;
}

/**
 * A short run of run-benchmark.sh (2 s measured after 1 s of warm-up, 10 connections, unless
 * `env` says otherwise) that must exit 0 and leave a result of status ok in `file` (by default
 * its OUTPUT_FILE): that result.
 */
export async function measuredRun(
  env: Record<string, string>,
  file = env.OUTPUT_FILE!,
): Promise<RunResult> {
  const settings = { DURATION: '2', WARMUP: '1', CONNECTIONS: '10', ...env };
  const { status, output } = await runScript('run-benchmark.sh', [], settings);
  assert.equal(status, 0, output);
  const r = readRunResult(file);
  assert.equal(r.status, 'ok', r.failureReasons.join('; '));
  return r;
}
