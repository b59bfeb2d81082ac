/**
 * The run file's contract: the JSON Schema under docs/ is what the harness's zod schema
 * generates, and a file that drifts from it (a field missing, renamed or unknown) is refused
 * with the field named. Every run `bench run` writes goes through this check
 * (test/integration/run-benchmark.test.ts runs real ones).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { PROJECT_ROOT } from '../../../src/harness/paths.js';
import {
  RunFileSchema,
  ratesOf,
  runFileJsonSchema,
  writeRunFile,
} from '../../../src/bench/run/result-schema.js';
import type { RunFile } from '../../../src/bench/run/result-schema.js';
import { SessionSchema, writeSession } from '../../../src/bench/run/session.js';

function validRun(): RunFile {
  return {
    schema: 'sluice-bench-run/1',
    status: 'ok',
    failureReasons: [],
    config: {
      implementation: 'iovalkey',
      client: 'iovalkey',
      mode: 'standalone',
      workload: 'light',
      transport: 'http',
      connections: 50,
      durationSec: 10,
      warmupSec: 3,
      run: 1,
      runs: 3,
      keys: 10000,
      distribution: 'uniform',
      zipfExponent: null,
      floodShare: null,
      quota: { points: 100, windowSec: 1 },
      inMemoryBlock: true,
      relayWorkIterations: 0,
      law: null,
      seed: 1,
      relayImpl: 'reference',
      freshEvents: null,
      workers: 1,
      rate: null,
    },
    clientSettings: { client: 'iovalkey' },
    startedAt: '2026-11-23T00:00:00.000Z',
    finishedAt: '2026-11-23T00:00:13.000Z',
    machine: { cpus: 2 },
    versions: { sluice: '0.1.0' },
    wallSeconds: 10.01,
    counts: {
      requests: 1000,
      ok2xx: 1000,
      limited429: 0,
      otherNon2xx: 0,
      errors: 0,
      timeouts: 0,
      otherStatuses: {},
    },
    rates: ratesOf(
      { requests: 1000, ok2xx: 1000, limited429: 0, otherNon2xx: 0, errors: 0 },
      10.01,
    ),
    latencyMs: { p50: 5, p90: 8, p99: 12, max: 30, mean: 5.5 },
    load: { mode: 'closed' },
    processes: [
      {
        role: 'gateway',
        name: 'gateway',
        pid: 1234,
        cpuPercent: { mean: 50, max: 60 },
        rssBytes: { mean: 1e8, max: 1.1e8 },
        cpuMs: 5000,
        cpuMsPerRequest: 5,
        samples: [[0.25, 50, 1e8]],
      },
    ],
    valkey: {
      commands: { evalsha: 1000 },
      calls: 4000,
      perRequest: 4,
      scriptCalls: 1000,
      scriptCallsPerRequest: 1,
    },
    timeseries: null,
    adaptive: null,
    events: null,
  };
}

function problemWith(data: unknown): string {
  const r = RunFileSchema.safeParse(data);
  assert.equal(r.success, false, 'refused');
  return JSON.stringify(r.error.issues);
}

describe('the run file contract', { timeout: 30_000 }, () => {
  it('is checked in as docs/run-file.schema.json, exactly as the schema generates it', () => {
    const file = readFileSync(path.join(PROJECT_ROOT, 'docs', 'run-file.schema.json'), 'utf8');
    assert.equal(
      file,
      JSON.stringify(runFileJsonSchema(), null, 2) + '\n',
      'out of date: run `node dist/src/cli.js bench schema`',
    );
    const schema = JSON.parse(file) as { required: string[]; additionalProperties: boolean };
    assert.ok(schema.required.includes('counts') && schema.required.includes('processes'));
    assert.equal(schema.additionalProperties, false);
  });

  it('takes a complete run and refuses one that drifted, naming the field', () => {
    assert.equal(RunFileSchema.safeParse(validRun()).success, true);

    const missing = validRun() as Partial<RunFile>;
    delete missing.wallSeconds;
    assert.match(problemWith(missing), /wallSeconds/);

    const renamed = validRun() as unknown as Record<string, unknown>;
    renamed.wallSecs = renamed.wallSeconds;
    delete renamed.wallSeconds;
    assert.match(problemWith(renamed), /wallSecs/);

    const badProcess = validRun();
    (badProcess.processes[0] as Record<string, unknown>).cpuMsPerReq = 5;
    assert.match(problemWith(badProcess), /cpuMsPerReq/);

    const badWorkload = validRun();
    (badWorkload.config as Record<string, unknown>).workload = 'lite';
    assert.match(problemWith(badWorkload), /workload/);
  });

  it('writes a file only when it keeps the contract', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'sluice-schema-'));
    try {
      const good = path.join(dir, 'good.json');
      writeRunFile(good, validRun());
      assert.deepEqual(JSON.parse(readFileSync(good, 'utf8')), validRun());
      const bad = { ...validRun(), counts: { requests: -1 } } as unknown as RunFile;
      assert.throws(
        () => writeRunFile(path.join(dir, 'bad.json'), bad),
        /breaks its schema.*counts/s,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('records a session: session.json for the report, README.md for people', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'sluice-session-'));
    try {
      await writeSession(dir, './scripts/run-all.sh --quick', { 'warm-up': '3s' });
      const session = SessionSchema.parse(
        JSON.parse(readFileSync(path.join(dir, 'session.json'), 'utf8')),
      );
      assert.equal(session.command, './scripts/run-all.sh --quick');
      assert.equal(session.settings['warm-up'], '3s');
      assert.ok(session.versions['rate-limiter-flexible'] && session.machine.cpus);
      const readme = readFileSync(path.join(dir, 'README.md'), 'utf8');
      assert.match(readme, /Command: `\.\/scripts\/run-all\.sh --quick`/);
      assert.match(readme, /- warm-up: 3s/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
