/** The scaled-down real run's figures against the targets of issue 33, as a table. */
import type { FleetRunResult } from './fleet-run.js';

/** Targets: within the bound, no answer but 2xx and 429, back on Valkey, the multiplier. */
export const FLEET_TARGETS = { backOnValkeyMs: 2000, publishToAppliedP99Ms: 50 };

const ms = (v: number) => (Number.isFinite(v) ? `${Math.round(v)}` : '-');

export function formatFleetResult(r: FleetRunResult): string {
  const c = r.config;
  const l = r.load;
  const a = r.accuracy;
  const others =
    Object.values(l.otherStatuses).reduce((s, n) => s + n, 0) +
    Object.values(l.errors).reduce((s, n) => s + n, 0);
  const back = Math.max(...r.failover.lastInsuredAfterTakeoverMs);
  const m = r.multiplier;
  const i = r.insured;
  const gwP99 = Math.max(...m.gatewayP99Ms);
  const rows: [string, string, string][] = [
    [
      'writes offered / admitted / 429 / unsent',
      `${l.offered} / ${l.admitted} / ${l.limited} / ${l.unsent} in ${l.wallSec.toFixed(1)} s`,
      '',
    ],
    [
      'answers other than 2xx and 429',
      `${others} ${JSON.stringify({ ...l.otherStatuses, ...l.errors })}` +
        (l.idleResetsRetried ? ` (${l.idleResetsRetried} idle keep-alive resets, sent again)` : ''),
      '0',
    ],
    [
      'keys over their limit / most points over / keys over the bound',
      `${a.keysOverLimit} / ${a.maxOverPoints} / ${a.keysOverBound}`,
      `0 over the bound (${a.bound} points, limit ${a.limit})`,
    ],
    [
      'hot key admitted: before the kill / while its primary was down / after',
      `${a.hot.beforeKill} / ${a.hot.outage} / ${a.hot.afterTakeover}`,
      `${a.limit} + bound in all`,
    ],
    [
      'failover: the replica took over after (ms)',
      `${ms(r.failover.takeoverMs)} (cluster-node-timeout ${c.nodeTimeoutMs})`,
      '',
    ],
    [
      'last insured decision after the takeover, worst gateway (ms)',
      back === -Infinity ? 'none after' : ms(back),
      `<= ${FLEET_TARGETS.backOnValkeyMs}`,
    ],
    [
      "migration of the hot key's slot: keys / ms",
      `${r.migration.keys} / ${ms(r.migration.durationMs)}`,
      '',
    ],
    [
      'insured decisions: before the kill / primary down / after the takeover / migration (+1 s) / after',
      `${i.beforeKill} / ${i.down} / ${i.afterTakeover} / ${i.migration} / ${i.after}`,
      '0 but while the primary is down',
    ],
    [
      'request latency p50 / p99 / p99.9 / max (ms)',
      `${l.latencyMs.p50.toFixed(1)} / ${l.latencyMs.p99.toFixed(1)} / ${l.latencyMs.p999.toFixed(1)} / ${l.latencyMs.max.toFixed(0)}`,
      '',
    ],
    [
      `multiplier: reports applied / expected (${m.subscribers} subscribers)`,
      `${m.reached} / ${m.expected}`,
      'all',
    ],
    [
      'publish to applied p50 / p99 / max, connections; worst gateway p99 (ms)',
      `${m.connections.p50.toFixed(0)} / ${m.connections.p99.toFixed(0)} / ${m.connections.max.toFixed(0)}; ${gwP99.toFixed(0)}`,
      `p99 <= ${FLEET_TARGETS.publishToAppliedP99Ms}`,
    ],
  ];
  const head =
    `${c.gateways} gateways x 3 primaries (+3 replicas) x ${c.identities} identities, ` +
    `${c.writesPerSec} writes/s (hot key ${Math.round(c.hotShare * 100)}%), ` +
    `limit ${c.limit} per ${c.windowSec} s, ${c.durationSec} s; ${r.valkeyVersion}`;
  return [
    head,
    '',
    '| figure | measured | target |',
    '| --- | --- | --- |',
    ...rows.map((row) => `| ${row.join(' | ')} |`),
  ].join('\n');
}
