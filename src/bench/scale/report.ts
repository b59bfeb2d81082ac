/** The simulation's table: one row per configuration, the figures the issue asks for. */
import type { ScaleResult } from './simulation.js';

const f = (x: number, digits = 0) => (Number.isFinite(x) ? x.toFixed(digits) : '-');
const k = (x: number) => (x >= 10_000 ? `${f(x / 1000)}k` : f(x));
const ms = (x: number) => (x >= 100 ? f(x) : x >= 1 ? f(x, 1) : f(x, 2));

export const SCALE_COLUMNS = [
  'gateways x primaries x identities',
  'writes/s',
  'leases',
  'faults',
  'over: windows / max pts (bound) / broken',
  'under % (max pts, bound)',
  'Valkey cmds/s per primary mean / max',
  'hot primary cmds/s (hot key)',
  'decision ms p50 / p99 / p99.9',
  'stranded pts per gateway mean / max',
  'insured %',
  'wall / CPU s',
];

export function scaleRow(r: ScaleResult): string {
  const c = r.config;
  const a = r.accuracy;
  const v = r.valkey;
  const faults = [c.failover ? 'failover' : '', c.migration ? 'migration' : ''].filter(Boolean);
  const cells = [
    `${c.gateways} x ${c.primaries} x ${k(c.identities)}`,
    k(c.writesPerSec),
    c.leases ? 'on' : 'off',
    faults.length ? faults.join(' + ') : 'none',
    `${a.overWindows} / ${a.maxOver} (${a.configOverBound}) / ${a.overBoundBroken}`,
    `${f(a.underPct, 2)} (${a.maxUnder}, ${a.underBound})`,
    `${k(v.commandsPerSecPerShard.mean)} / ${k(v.commandsPerSecPerShard.max)}`,
    `${k(v.hotShardCommandsPerSec)} (${k(v.hotKeyCommandsPerSec)})`,
    `${ms(r.latencyMs.p50)} / ${ms(r.latencyMs.p99)} / ${ms(r.latencyMs.p999)}`,
    `${f(r.strandedPerGateway.mean, 1)} / ${f(r.strandedPerGateway.max)}`,
    f((100 * (r.outcomes.insured ?? 0)) / Math.max(1, r.writes), 1),
    `${f(r.wallSec, 1)} / ${f(r.cpuSec, 1)}`,
  ];
  return `| ${cells.join(' | ')} |`;
}

export function formatScaleTable(results: readonly ScaleResult[]): string {
  return [
    `| ${SCALE_COLUMNS.join(' | ')} |`,
    `| ${SCALE_COLUMNS.map(() => '---').join(' | ')} |`,
    ...results.map(scaleRow),
  ].join('\n');
}
