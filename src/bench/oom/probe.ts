/**
 * `sluice bench oom-probe`: does a relay's memory, as its cgroup sees it (usage less inactive
 * file pages), respond to write load at all, and to what? Each workload runs against a fresh
 * relay in a fresh group with no limit, straight to the relay (no gateway): many small
 * events, large events, and large events fanned out to subscribers that never read.
 */
import { MemoryGroup } from './cgroup.js';
import { Flood } from './flood.js';
import type { FloodShape } from './flood.js';
import { NostrSocket } from './nostr-client.js';
import type { OomRelay } from './relays.js';
import { wsTransport } from './transports.js';

import type { ProbeWorkload } from './names.js';

export type { ProbeWorkload };

interface ProbePlan {
  what: string;
  shape: FloodShape;
  /** Writer connections (identities). */
  writers: number;
  contentBytes: number;
  /** Offered EVENTs per second (open loop; the in-flight bound caps what is sent). */
  rate: number;
  maxInFlight: number;
  /** Subscribers to every new kind-1 event that never read their socket. */
  slowReaders: number;
  /** Connections opened and held, idle (they read whatever comes). */
  idleConnections: number;
}

export function probePlan(w: ProbeWorkload, slowReaders: number): ProbePlan {
  const none = { slowReaders: 0, idleConnections: 0 };
  switch (w) {
    case 'small':
      return {
        what: 'many small events (64 B content), 4 connections, as fast as they are answered',
        shape: 'spam',
        writers: 4,
        contentBytes: 64,
        rate: 3000,
        maxInFlight: 512,
        ...none,
      };
    case 'large':
      return {
        what: 'large events (32 KiB content), 2 connections, as fast as they are answered',
        shape: 'spam',
        writers: 2,
        contentBytes: 32 * 1024,
        rate: 600,
        maxInFlight: 256,
        ...none,
      };
    case 'slow-readers':
      return {
        what: `large events (32 KiB) at 100/s from one connection, fanned out to ${slowReaders} subscribers that never read`,
        shape: 'heavy',
        writers: 1,
        contentBytes: 32 * 1024,
        rate: 100,
        maxInFlight: 256,
        slowReaders,
        idleConnections: 0,
      };
    case 'connections':
      return {
        what: '1,000 idle connections, no writes',
        shape: 'heavy',
        writers: 1,
        contentBytes: 64,
        rate: 0,
        maxInFlight: 1,
        slowReaders: 0,
        idleConnections: 1000,
      };
  }
}

export interface ProbeResult {
  workload: ProbeWorkload;
  what: string;
  idleBytes: number;
  peakBytes: number;
  /** At the end of the load. */
  endBytes: number;
  /** Of the working set at the end: anonymous memory, and file pages in active use. */
  endAnonBytes: number;
  endActiveFileBytes: number;
  /** After `quietSec` with no load (what the relay keeps). */
  afterQuietBytes: number;
  acked: number;
  ackedPerSec: number;
  ackedMiBPerSec: number;
  /** [seconds, working set bytes] every ~250 ms. */
  series: [number, number][];
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function runProbe(
  w: ProbeWorkload,
  o: {
    makeRelay(): Promise<OomRelay>;
    seconds: number;
    quietSec: number;
    slowReaders: number;
    /** Offered EVENTs per second instead of the workload's own. */
    rate?: number;
    cgroupParent?: string;
    log: (line: string) => void;
  },
): Promise<ProbeResult> {
  const plan = probePlan(w, o.slowReaders);
  if (o.rate !== undefined) {
    plan.rate = o.rate;
    plan.what = plan.what.replace(
      /as fast as they are answered|at \d+\/s/,
      `offered at ${o.rate}/s`,
    );
  }
  const group = await MemoryGroup.create(o.cgroupParent);
  const relay = await o.makeRelay();
  const readers: NostrSocket[] = [];
  let proc: Awaited<ReturnType<OomRelay['start']>> | undefined;
  try {
    proc = await relay.start(group.procsFile);
    await sleep(1500);
    const idleBytes = (await group.read()).workingSetBytes;
    const wsUrl = proc.url.replace(/^http/, 'ws');
    for (let r = 0; r < plan.slowReaders; r++) {
      const s = await NostrSocket.open(wsUrl, `127.2.0.${r + 1}`);
      s.subscribe(`slow-${r}`, [1]);
      readers.push(s);
    }
    // Let the REQs arrive before the readers stop reading.
    await sleep(500);
    for (const s of readers) s.stopReading();
    for (let c = 0; c < plan.idleConnections; c++) {
      readers.push(await NostrSocket.open(wsUrl, `127.3.${Math.floor(c / 250)}.${(c % 250) + 1}`));
    }
    const transport = wsTransport([proc.url], plan.shape, 'held');
    const flood = await Flood.create({
      shape: plan.shape,
      identities: plan.writers,
      contentBytes: plan.contentBytes,
      seed: 7,
      maxInFlight: plan.maxInFlight,
      transport,
    });
    const series: [number, number][] = [];
    let peakBytes = idleBytes;
    let running = true;
    const t0 = performance.now();
    const sampling = (async () => {
      while (running) {
        const ws = (await group.read()).workingSetBytes;
        peakBytes = Math.max(peakBytes, ws);
        series.push([Number(((performance.now() - t0) / 1000).toFixed(2)), ws]);
        await sleep(250);
      }
    })();
    await flood.run(() => plan.rate, o.seconds, undefined, 3000);
    const end = await group.read();
    await transport.close();
    await sleep(o.quietSec * 1000);
    running = false;
    await sampling;
    const afterQuietBytes = (await group.read()).workingSetBytes;
    const eventBytes = await Flood.storedBytes(plan.contentBytes);
    const result: ProbeResult = {
      workload: w,
      what: plan.what,
      idleBytes,
      peakBytes,
      endBytes: end.workingSetBytes,
      endAnonBytes: end.anonBytes,
      endActiveFileBytes: end.activeFileBytes,
      afterQuietBytes,
      acked: flood.acknowledged,
      ackedPerSec: flood.acknowledged / o.seconds,
      ackedMiBPerSec: (flood.acknowledged * eventBytes) / o.seconds / 2 ** 20,
      series,
    };
    o.log(
      `  ${relay.impl} ${w}: idle ${mib(idleBytes)}, peak ${mib(peakBytes)}, end ${mib(end.workingSetBytes)} ` +
        `(anon ${mib(end.anonBytes)}, active file ${mib(end.activeFileBytes)}), ` +
        `after ${o.quietSec} s quiet ${mib(afterQuietBytes)}; ${result.ackedPerSec.toFixed(0)} events/s ` +
        `(${result.ackedMiBPerSec.toFixed(1)} MiB/s) acknowledged`,
    );
    return result;
  } finally {
    for (const s of readers) s.close();
    await proc?.stop().catch(() => undefined);
    await group.remove();
    relay.dispose();
  }
}

export function mib(bytes: number): string {
  return `${(bytes / 2 ** 20).toFixed(1)} MiB`;
}

/** The probe's markdown table. */
export function probeTable(relayName: string, results: ProbeResult[], quietSec: number): string {
  const lines = [
    `| relay | workload | acknowledged | idle | peak | at the end (anon + active file) | after ${quietSec} s quiet |`,
    '|---|---|---|---|---|---|---|',
  ];
  for (const r of results) {
    lines.push(
      `| ${relayName} | ${r.what} | ${r.ackedPerSec.toFixed(0)}/s (${r.ackedMiBPerSec.toFixed(1)} MiB/s) | ` +
        `${mib(r.idleBytes)} | ${mib(r.peakBytes)} | ${mib(r.endBytes)} (${mib(r.endAnonBytes)} + ` +
        `${mib(r.endActiveFileBytes)}) | ${mib(r.afterQuietBytes)} |`,
    );
  }
  return lines.join('\n');
}
