import { performance } from 'node:perf_hooks';
import { CLIENT_KINDS, clientKey, createStore } from '../store/index.js';
import type { ClientKind, NodeAddress, Topology } from '../store/index.js';

export interface SmokeTarget {
  mode: Topology;
  nodes: NodeAddress[];
}

export interface SmokeRow {
  client: ClientKind;
  mode: Topology;
  consumes: number;
  allowed: number;
  rejected: number;
  errors: number;
  expectedAllowed: number;
  opsPerSec: number;
  p50Ms: number;
  p99Ms: number;
}

export interface SmokePlan {
  keys: number;
  pointsPerKey: number;
  consumesPerKey: number;
  concurrency: number;
}

export const DEFAULT_SMOKE_PLAN: SmokePlan = {
  keys: 200,
  pointsPerKey: 5,
  consumesPerKey: 10,
  concurrency: 50,
};

/** The q-th quantile (0..1) of already sorted values, nearest-rank. */
export function quantile(sorted: number[], q: number): number {
  if (sorted.length === 0) return NaN;
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[rank]!;
}

/**
 * Consume through one client on one topology: every key gets consumesPerKey consumes against
 * a limit of pointsPerKey, so exactly keys x pointsPerKey must be admitted.
 */
export async function smokeOne(
  client: ClientKind,
  target: SmokeTarget,
  plan: SmokePlan,
): Promise<SmokeRow> {
  const store = await createStore({ client, mode: target.mode, nodes: target.nodes });
  try {
    const limiter = store.limiter({
      keyPrefix: `smoke:${client}:${Date.now()}`,
      points: plan.pointsPerKey,
      duration: 60,
    });
    const jobs = Array.from({ length: plan.keys * plan.consumesPerKey }, (_, i) =>
      clientKey(`smoke-client-${i % plan.keys}`),
    );
    const latencies: number[] = [];
    let allowed = 0;
    let rejected = 0;
    let errors = 0;
    let next = 0;
    const worker = async () => {
      while (next < jobs.length) {
        const key = jobs[next++]!;
        const t0 = performance.now();
        try {
          if ((await limiter.consume(key)).allowed) allowed++;
          else rejected++;
        } catch {
          errors++;
        }
        latencies.push(performance.now() - t0);
      }
    };
    const started = performance.now();
    await Promise.all(Array.from({ length: plan.concurrency }, worker));
    const seconds = (performance.now() - started) / 1000;
    latencies.sort((a, b) => a - b);
    return {
      client,
      mode: target.mode,
      consumes: jobs.length,
      allowed,
      rejected,
      errors,
      expectedAllowed: plan.keys * plan.pointsPerKey,
      opsPerSec: jobs.length / seconds,
      p50Ms: quantile(latencies, 0.5),
      p99Ms: quantile(latencies, 0.99),
    };
  } finally {
    await store.close();
  }
}

export async function runSmoke(
  targets: SmokeTarget[],
  plan: SmokePlan = DEFAULT_SMOKE_PLAN,
): Promise<SmokeRow[]> {
  const rows: SmokeRow[] = [];
  for (const target of targets) {
    for (const client of CLIENT_KINDS) rows.push(await smokeOne(client, target, plan));
  }
  return rows;
}

export function isCorrect(row: SmokeRow): boolean {
  return row.errors === 0 && row.allowed === row.expectedAllowed;
}

export function formatSmokeTable(rows: SmokeRow[]): string {
  const header = [
    'client',
    'mode',
    'consumes',
    'allowed',
    'rejected',
    'errors',
    'consumes/s',
    'p50 ms',
    'p99 ms',
    'check',
  ];
  const body = rows.map((r) => [
    r.client,
    r.mode,
    String(r.consumes),
    String(r.allowed),
    String(r.rejected),
    String(r.errors),
    r.opsPerSec.toFixed(0),
    r.p50Ms.toFixed(2),
    r.p99Ms.toFixed(2),
    isCorrect(r) ? 'ok' : `FAIL (expected ${r.expectedAllowed} allowed)`,
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((row) => row[i]!.length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => c.padEnd(widths[i]!))
      .join('  ')
      .trimEnd();
  return [line(header), line(widths.map((w) => '-'.repeat(w))), ...body.map(line)].join('\n');
}
