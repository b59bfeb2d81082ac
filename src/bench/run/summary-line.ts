import path from 'node:path';
import type { RunResult } from './runner.js';
import { workloadOf } from './config.js';

/** One line per run for the log: what ran, what it measured, where the file is. */
export function formatRunLine(r: RunResult, file: string): string {
  const c = r.config;
  const offered = c.rate ? ` at ${c.rate}/s offered (open loop)` : '';
  const workers = c.workers === 'auto' ? ` workers auto (${r.gatewayWorkers ?? '?'})` : '';
  const pinned = c.cpus?.length ? ` on CPUs ${c.cpus.join(',')}` : '';
  const head = `${c.implementation}:${c.mode} ${workloadOf(c)}${offered}${workers}${pinned} ${c.connections}c ${c.durationSec}s run ${c.run}/${c.runs}`;
  if (r.status !== 'ok' || !r.rates || !r.counts) {
    return `${head}: FAILED (${r.failureReasons.join('; ')}) -> ${path.basename(file)}`;
  }
  const share = r.counts.requests ? (100 * r.counts.limited429) / r.counts.requests : 0;
  const lat = r.latencyMs ? `, p50 ${r.latencyMs.p50} ms, p99 ${r.latencyMs.p99} ms` : '';
  const v = r.valkey;
  const cmds =
    v?.perRequest != null
      ? `, Valkey ${v.scriptCallsPerRequest!.toFixed(2)} round trips and ${v.perRequest.toFixed(2)} commands/req`
      : '';
  const reads = r.reads
    ? `, ${r.reads.eventsPerSec.toFixed(0)} EVENT/s delivered (${r.reads.limit} a REQ, ${r.counts.timeouts} REQs unfinished)`
    : '';
  return `${head}: ${r.rates.requestsPerSec.toFixed(0)} req/s (${share.toFixed(1)}% 429)${reads}${lat}${cmds} -> ${path.basename(file)}`;
}
