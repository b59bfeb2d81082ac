/**
 * `sluice bench oom`: every arm against every flood, each in its own memory cgroup, and the
 * session written as JSON and a markdown table. The cgroup is checked first: where one cannot
 * be made the benchmark stops with the reason, before anything else starts.
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import type { AdaptiveValkey, Variant } from '../run/adaptive-gateways.js';
import type { RelayImpl } from '../run/config.js';
import { writeResult } from '../results.js';
import { MemoryGroup } from './cgroup.js';
import { Flood } from './flood.js';
import type { FloodShape, FloodTransport } from './flood.js';
import { runArm } from './oom-arm.js';
import type { ArmResult, OomScenario } from './oom-arm.js';
import type { OomRelay } from './relays.js';
import { referenceRelay, thirdPartyOomRelay } from './relays.js';
import { allMet, markdownTable, targetsOf } from './summary.js';
import { httpTransport, wsTransport } from './transports.js';

export interface OomBenchOptions {
  relayImpl: RelayImpl;
  variants: Variant[];
  floods: FloodShape[];
  valkey: AdaptiveValkey;
  cgroupParent?: string;
  drainBytesPerSec: number;
  /**
   * Bytes of events per second the relay takes while staying at its target: the reference
   * relay's drain; for nostr-rs-relay, measured with oom-probe.
   */
  sustainableBytesPerSec: number;
  contentBytes: number;
  limitHeadroomBytes: number;
  targetHeadroomBytes: number;
  overload: number;
  calmSec: number;
  floodSec: number;
  identities: number;
  gateways: number;
  writeBudget: boolean;
  learnBudget: boolean;
  learnFromDrain: boolean;
  feedSource: 'cgroup' | 'relay';
  slowReaders: number;
  slowReadersVia: 'relay' | 'gateway';
  seed: number;
  outDir: string;
  command: string;
}

/** Make and remove one group, so a host without cgroups fails before anything starts. */
export async function checkCgroup(parent?: string): Promise<{ version: 1 | 2; parent: string }> {
  const group = await MemoryGroup.create(parent);
  await group.remove();
  return { version: group.version, parent: path.dirname(group.dir) };
}

/** A fresh relay of `impl` per arm (its own port and data). */
export function relayFactory(
  impl: RelayImpl,
  drainBytesPerSec: number,
  maxEventBytes: number,
  log: (line: string) => void,
): () => Promise<OomRelay> {
  const env = { ...process.env };
  return impl === 'reference'
    ? () => referenceRelay({ drainBytesPerSec, maxEventBytes, env })
    : () => thirdPartyOomRelay({ impl, env, log });
}

export async function runOomBench(
  o: OomBenchOptions,
  log: (line: string) => void,
  signal?: AbortSignal,
): Promise<{ jsonFile: string; mdFile: string; table: string; results: ArmResult[] }> {
  const where = await checkCgroup(o.cgroupParent);
  log(`memory cgroups: v${where.version}, under ${where.parent}`);
  const eventBytes = await Flood.storedBytes(o.contentBytes);
  const sustainablePerSec = o.sustainableBytesPerSec / eventBytes;
  const scenario: OomScenario = {
    limitHeadroomBytes: o.limitHeadroomBytes,
    targetHeadroomBytes: o.targetHeadroomBytes,
    sustainablePerSec,
    overload: o.overload,
    calmLoad: 0.5,
    calmSec: o.calmSec,
    floodSec: o.floodSec,
    contentBytes: o.contentBytes,
    eventBytes,
    identities: o.identities,
    gateways: o.gateways,
    tickMs: 500,
    writeBudget: o.writeBudget,
    learnBudget: o.learnBudget,
    learnFromDrain: o.learnFromDrain,
    feedSource: o.feedSource,
    seed: o.seed,
    maxInFlight: 1024,
    slowReaders: o.slowReaders,
    slowReadersVia: o.slowReadersVia,
  };
  const env = { ...process.env };
  const makeRelay = relayFactory(
    o.relayImpl,
    o.drainBytesPerSec,
    Math.max(128 * 1024, 2 * eventBytes),
    log,
  );
  const transportFor = (urls: string[], shape: FloodShape): FloodTransport =>
    o.relayImpl === 'reference' ? httpTransport(urls, shape) : wsTransport(urls, shape);
  const results: ArmResult[] = [];
  for (const shape of o.floods) {
    for (const variant of o.variants) {
      if (signal?.aborted) throw new Error('stopped');
      results.push(
        await runArm(variant, shape, scenario, {
          makeRelay,
          valkey: o.valkey,
          env,
          cgroupParent: o.cgroupParent,
          transportFor,
          log,
          signal,
        }),
      );
    }
  }
  const relayName =
    o.relayImpl +
    (o.slowReaders > 0 ? ` + ${o.slowReaders} slow readers (via ${o.slowReadersVia})` : '');
  const rows = results.map((r) => ({
    relay: relayName,
    flood: r.flood,
    variant: r.variant,
    budget:
      r.variant === 'none'
        ? '-'
        : r.writeBudgetPerSec
          ? `configured ${r.writeBudgetPerSec}/s`
          : o.learnBudget
            ? o.learnFromDrain && o.relayImpl === 'reference'
              ? 'learned (drain)'
              : 'learned (memory)'
            : 'none',
    summary: r.summary,
  }));
  const table = markdownTable(rows);
  const name = `oom-${o.relayImpl}${o.slowReaders > 0 ? `-slow-readers-${o.slowReadersVia}` : ''}`;
  const jsonFile = writeResult(o.outDir, `${name}.json`, 'oom-bench', {
    command: o.command,
    cgroup: where,
    scenario,
    options: { ...o, outDir: undefined },
    arms: results.map((r) => ({
      ...r,
      targets: targetsOf(r.summary),
      targetsMet: allMet(targetsOf(r.summary)),
    })),
  });
  const mdFile = path.join(o.outDir, `${name}.md`);
  writeFileSync(
    mdFile,
    `# OOM benchmark: ${relayName}\n\n\`${o.command}\`\n\n${table}\n\n` +
      `Limit = idle + ${mibText(o.limitHeadroomBytes)}, target = idle + ${mibText(o.targetHeadroomBytes)} ` +
      `(the relay's working set: cgroup usage less inactive file pages), ` +
      `sustainable ${sustainablePerSec.toFixed(1)} events/s (${eventBytes} bytes each), ` +
      `flood ${o.overload} x sustainable for ${o.floodSec} s after ${o.calmSec} s at 0.5 x.\n`,
  );
  return { jsonFile, mdFile, table, results };
}

function mibText(bytes: number): string {
  return `${Math.round(bytes / 2 ** 20)} MiB`;
}
