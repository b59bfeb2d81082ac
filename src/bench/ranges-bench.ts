/**
 * Address ranges (issue 34) under a flood: a real gateway process, quotas.ranges on or off,
 * takes a flood that names a new network on every write (X-Forwarded-For through a trusted
 * loopback proxy: the /64s of one /56, the /56s of one /48, or whole /48s) beside honest
 * writers, each alone in a /64 of another /48, paced below their own limit. What each group
 * is accepted, per second, is what the section "Address ranges (issue 34)" of
 * docs/BENCHMARKS.md reports.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Pool } from 'undici';
import type { ClientKind, NodeAddress } from '../store/index.js';
import { startGateway } from '../harness/processes.js';
import type { SluiceProcess } from '../harness/processes.js';
import { postAs, startStubRelay, stubRelayGatewayConfig } from './clients-bench.js';
import { withBenchValkey } from './own-valkey.js';

/** What the flood rotates through: the /64s of one /56, the /56s of one /48, or /48s. */
export type Rotation = 64 | 56 | 48;

export interface RangesBenchOptions {
  /** quotas.ranges.enabled. */
  ranges: boolean;
  rotate: Rotation;
  durationSec: number;
  /** Closed-loop connections of the flood. */
  floodConnections: number;
  /** Honest writers, each its own /64 of the honest /48. */
  honest: number;
  /** Writes a second of each honest writer. */
  honestRate: number;
  /** The default tier's write points (per /64) per window; the /56 has 4x, the /48 8x. */
  points: number;
  windowSec: number;
  valkeyClient: ClientKind;
  valkey?: NodeAddress;
}

export interface GroupTally {
  sent: number;
  accepted: number;
  refused: number;
  /** Answers other than 200 and 429, and requests that failed. */
  other: number;
}

export interface RangesBenchResult {
  seconds: number;
  flood: GroupTally;
  honest: GroupTally;
  /** What the flood may be accepted at most with ranges on: its range's limit per window. */
  floodBound: number | undefined;
  /** Ranges on: no honest write refused, and the flood within its bound. */
  held: boolean;
}

/** Limits per window: the /64 (the default tier), its /56 and its /48. */
export function rangeLimits(points: number) {
  return { client: points, '/56': 4 * points, '/48': 8 * points };
}

/** The flood's write n: a new /64 of 2001:db8:f:100::/56, /56 of 2001:db8:f::/48, or /48. */
export function floodAddress(n: number, rotate: Rotation): string {
  const i = n % 256;
  if (rotate === 64) return `2001:db8:f:1${i.toString(16).padStart(2, '0')}::1`;
  if (rotate === 56) return `2001:db8:f:${(i << 8).toString(16)}::1`;
  return `2001:db8:${(0x1000 + (n % 0xefff)).toString(16)}::1`;
}

/** Honest writer i: alone in its /64 of 2001:db8:b::/48. */
export function honestAddress(i: number): string {
  return `2001:db8:b:${(i + 1).toString(16)}::7`;
}

function gatewayConfig(opts: RangesBenchOptions, valkey: NodeAddress, relayUrl: string) {
  const limits = rangeLimits(opts.points);
  const write = (points: number) => ({ points, windowSec: opts.windowSec });
  return {
    ...stubRelayGatewayConfig(opts.valkeyClient, valkey, relayUrl),
    quotas: {
      keyPrefix: `bench-ranges-${Date.now().toString(36)}`,
      tiers: { default: { write: write(limits.client) } },
      ranges: {
        enabled: opts.ranges,
        ipv6: [
          { prefixLength: 56, write: write(limits['/56']) },
          { prefixLength: 48, write: write(limits['/48']) },
        ],
      },
    },
  };
}

const tally = (): GroupTally => ({ sent: 0, accepted: 0, refused: 0, other: 0 });
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function write(pool: Pool, xff: string, t: GroupTally): Promise<void> {
  t.sent++;
  const status = await postAs(pool, '/ingest', xff);
  if (status === 200) t.accepted++;
  else if (status === 429) t.refused++;
  else t.other++;
}

/** The flood (closed loop) and the honest writers (paced) for the duration. */
async function sendLoad(url: string, opts: RangesBenchOptions) {
  const pool = new Pool(url, { connections: opts.floodConnections + opts.honest, pipelining: 1 });
  const flood = tally();
  const honest = tally();
  const end = performance.now() + opts.durationSec * 1000;
  let n = 0;
  const flooder = async () => {
    while (performance.now() < end) await write(pool, floodAddress(n++, opts.rotate), flood);
  };
  const honestWriter = async (i: number) => {
    const gapMs = 1000 / opts.honestRate;
    for (let due = performance.now(); due < end; due += gapMs) {
      await sleep(Math.max(0, due - performance.now()));
      await write(pool, honestAddress(i), honest);
    }
  };
  try {
    await Promise.all([
      ...Array.from({ length: opts.floodConnections }, flooder),
      ...Array.from({ length: opts.honest }, (_, i) => honestWriter(i)),
    ]);
  } finally {
    await pool.close();
  }
  return { flood, honest };
}

/** The most the flood can be accepted with ranges on: its range's limit in each window begun. */
function floodBound(opts: RangesBenchOptions): number | undefined {
  if (!opts.ranges || opts.rotate === 48) return undefined;
  const limits = rangeLimits(opts.points);
  const perWindow = opts.rotate === 64 ? limits['/56'] : limits['/48'];
  return perWindow * (Math.ceil(opts.durationSec / opts.windowSec) + 1);
}

export async function runRangesBench(
  opts: RangesBenchOptions,
  log: (line: string) => void,
): Promise<RangesBenchResult> {
  return withBenchValkey('bench-ranges', opts.valkey, log, async (valkey, env) => {
    const configDir = mkdtempSync(path.join(os.tmpdir(), 'sluice-bench-ranges-'));
    let relay: Awaited<ReturnType<typeof startStubRelay>> | undefined;
    let gateway: SluiceProcess | undefined;
    try {
      relay = await startStubRelay();
      const file = path.join(configDir, 'gateway.json');
      ({ proc: gateway } = await startGateway(gatewayConfig(opts, valkey, relay.url), file, {
        env,
      }));
      log(`gateway pid ${gateway.pid} ready; ranges ${opts.ranges ? 'on' : 'off'}`);
      const started = performance.now();
      const { flood, honest } = await sendLoad(gateway.url, opts);
      const seconds = (performance.now() - started) / 1000;
      const bound = floodBound(opts);
      const held =
        honest.refused === 0 &&
        honest.other === 0 &&
        (bound === undefined || flood.accepted <= bound);
      return { seconds, flood, honest, floodBound: bound, held };
    } finally {
      await gateway?.stop();
      await relay?.close();
      rmSync(configDir, { recursive: true, force: true });
    }
  });
}

export function formatRangesBench(r: RangesBenchResult, opts: RangesBenchOptions): string {
  const limits = rangeLimits(opts.points);
  const rotating = { 64: '/64s of one /56', 56: '/56s of one /48', 48: 'whole /48s' }[opts.rotate];
  const row = (name: string, t: GroupTally) =>
    `| ${name} | ${t.sent} | ${t.accepted} | ${(t.accepted / r.seconds).toFixed(1)} | ${t.refused} | ${t.other} |`;
  return [
    `ranges ${opts.ranges ? 'on' : 'off'}; flood rotating ${rotating} (${opts.floodConnections} connections, closed loop); ` +
      `${opts.honest} honest writers at ${opts.honestRate}/s each, each alone in a /64 of another /48; ` +
      `limits per ${opts.windowSec} s: /64 ${limits.client}, /56 ${limits['/56']}, /48 ${limits['/48']}; ${r.seconds.toFixed(1)} s`,
    '',
    '| group | sent | accepted | accepted/s | refused (429) | other |',
    '| --- | --- | --- | --- | --- | --- |',
    row('flood', r.flood),
    row('honest', r.honest),
    '',
    r.floodBound === undefined
      ? 'flood bound: none (ranges off, or whole /48s rotated: what ranges cannot hold)'
      : `flood bound: ${r.floodBound} (its range's limit in each window begun); ${r.held ? 'held' : 'NOT HELD'}`,
  ].join('\n');
}
