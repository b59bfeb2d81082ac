/** The validation's comparison: each figure simulated against the same run for real. */
import type { RealScaleResult } from './real-run.js';
import type { ScaleResult } from './simulation.js';

export interface FigurePair {
  figure: string;
  simulated: number;
  real: number;
  /** |sim - real| / real, percent (0 when both are 0; Infinity when only real is 0). */
  diffPct: number;
  /** Within 10%, or for a latency within the simulation's time step (it resolves no finer). */
  within10: boolean;
}

export function relativeDiffPct(sim: number, real: number): number {
  if (sim === real) return 0;
  if (real === 0) return Infinity;
  return (100 * Math.abs(sim - real)) / Math.abs(real);
}

function pair(figure: string, simulated: number, real: number, absoluteSlack = 0): FigurePair {
  const diffPct = relativeDiffPct(simulated, real);
  const within10 = diffPct <= 10 || Math.abs(simulated - real) <= absoluteSlack;
  return { figure, simulated, real, diffPct, within10 };
}

export function compareRuns(sim: ScaleResult, real: RealScaleResult): FigurePair[] {
  const perShard = sim.valkey.perShard.map((c, i) =>
    pair(
      `Valkey script calls/s, primary ${i}`,
      c / sim.config.durationSec,
      real.commandsPerSecPerShard[i] ?? NaN,
    ),
  );
  return [
    pair('writes', sim.writes, real.writes),
    pair('admitted', sim.admitted, real.admitted),
    pair('insured decisions', sim.outcomes.insured ?? 0, real.outcomes.insured ?? 0),
    pair('over-admitted points', sim.accuracy.overPoints, real.accuracy.overPoints),
    pair('under-admitted points', sim.accuracy.underPoints, real.accuracy.underPoints),
    pair('under-admission %', sim.accuracy.underPct, real.accuracy.underPct),
    ...perShard,
    pair(
      'stranded points per gateway (mean)',
      sim.strandedPerGateway.mean,
      real.strandedPerGateway.mean,
    ),
    pair('decision p50 ms', sim.latencyMs.p50, real.latencyMs.p50, sim.config.tickMs),
    pair('decision p99 ms', sim.latencyMs.p99, real.latencyMs.p99, sim.config.tickMs),
  ];
}

export function formatComparison(label: string, pairs: readonly FigurePair[]): string {
  const n = (x: number) =>
    Number.isFinite(x) ? (Math.abs(x) >= 100 ? x.toFixed(0) : x.toFixed(2)) : '-';
  return [
    `${label}`,
    '',
    '| figure | simulated | real | difference % | within 10% |',
    '| --- | --- | --- | --- | --- |',
    ...pairs.map(
      (p) =>
        `| ${p.figure} | ${n(p.simulated)} | ${n(p.real)} | ${n(p.diffPct)} | ${p.within10 ? 'yes' : 'no'} |`,
    ),
  ].join('\n');
}
