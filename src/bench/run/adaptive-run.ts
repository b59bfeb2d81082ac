/**
 * The adaptive workload as one run: the pressure-feed scenario (calm, then a write flood at
 * three times the relay's drain) under one control law, recorded as time series.
 */
import path from 'node:path';
import { runVariant } from './adaptive-variant.js';
import { runDir } from '../../harness/paths.js';
import type { RunConfig } from './config.js';
import { withCpuPerRequest } from './proc-sampler.js';
import { ratesOf } from './result-schema.js';
import type { RunResult, RunTargets } from './runner.js';
import { failedRun, resultBase } from './runner.js';
import { commandCalls, commandDelta, discoverNodes, watchedValkey } from './valkey-stats.js';

const MiB = 1024 * 1024;
/** The scenario of docs/BENCHMARKS.md, shortened to the run's duration. */
export const ADAPTIVE_SCENARIO = {
  drainBytesPerSec: 2 * MiB,
  eventContentBytes: 32 * 1024,
  overload: 3,
  headroomBytes: 64 * MiB,
  tickMs: 500,
};

export function calmSeconds(durationSec: number): number {
  return Math.max(5, Math.round(durationSec / 4));
}

export async function runAdaptive(
  cfg: RunConfig,
  targets: RunTargets,
  log: (line: string) => void,
): Promise<RunResult> {
  const base = await resultBase(cfg, targets);
  const calmSec = calmSeconds(cfg.durationSec);
  const opts = { ...ADAPTIVE_SCENARIO, calmSec, overloadSec: cfg.durationSec - calmSec };
  try {
    if (!cfg.client || !cfg.law) throw new Error('the adaptive workload needs a client and a law');
    if (opts.overloadSec < 5) throw new Error('the adaptive workload needs at least 10 s');
    const nodes = await discoverNodes(targets.valkey);
    const before = await commandCalls(nodes);
    const env = { ...process.env, SLUICE_RUN_DIR: path.join(runDir(), 'bench-adaptive') };
    const r = await runVariant(
      cfg.law,
      opts,
      {
        client: cfg.client,
        mode: cfg.mode,
        nodes: [`${targets.valkey.host}:${targets.valkey.port}`],
      },
      env,
      log,
      watchedValkey(nodes),
    );
    const after = await commandCalls(nodes);
    const reasons: string[] = [];
    if (r.counts.errors > 0) reasons.push(`${r.counts.errors} connection errors`);
    if (r.counts.otherNon2xx > 0) reasons.push(`${r.counts.otherNon2xx} unexpected statuses`);
    if (r.samples.length === 0) reasons.push('no samples');
    const s = r.wallSeconds;
    return {
      ...base,
      status: reasons.length ? 'failed' : 'ok',
      failureReasons: reasons,
      clientSettings: { client: cfg.client, mode: cfg.mode, note: 'feed and both gateways' },
      finishedAt: new Date().toISOString(),
      wallSeconds: s,
      counts: { ...r.counts, timeouts: 0, otherStatuses: {} },
      rates: ratesOf(r.counts, s),
      latencyMs: null,
      processes: withCpuPerRequest(r.processes, r.counts.requests),
      valkey: commandDelta(before, after, r.counts.requests),
      timeseries: {
        t: r.samples.map((x) => Number(x.t.toFixed(2))),
        u: r.samples.map((x) => Number(x.u.toFixed(4))),
        m: r.samples.map((x) => x.m),
        admittedPerSec: r.samples.map((x) => Number(x.admittedPerSec.toFixed(1))),
        backlogBytes: r.samples.map((x) => x.backlogBytes),
        mode: r.samples.map((x) => x.mode),
      },
      adaptive: {
        calmSec,
        overloadSec: opts.overloadSec,
        targetBytes: r.target,
        idleBytes: r.idle,
        quotaPerSec: r.quotaPerSec,
        ...r.summary,
      },
    };
  } catch (err) {
    return failedRun({ ...base, timeseries: null, adaptive: null }, err, null, log);
  }
}
