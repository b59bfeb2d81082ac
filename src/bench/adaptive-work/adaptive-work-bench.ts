/**
 * `sluice bench adaptive-work` (issue 34, part 3): a spam wave of fresh keys, each under its
 * own quota, against a member writing at a steady pace, while the relay node's multiplier
 * steps down (set through /admin/flow-control), with nostr.pow.adaptive off and then on.
 * The wave is one thread signing as fast as it can, mining each event to the difficulty in
 * force (as a spammer who reads NIP-11 would), sent over several WebSocket connections from
 * addresses of its own. Reported per step: events accepted per second, the wave's and the
 * member's.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Worker } from 'node:worker_threads';
import { finalizeEvent, generateSecretKey, getPublicKey } from 'nostr-tools/pure';
import WebSocket from 'ws';
import { startGateway, startRelay } from '../../harness/processes.js';
import type { RunningGateway, SluiceProcess } from '../../harness/processes.js';
import { requiredDifficulty } from '../../nostr/adaptive-work.js';
import type { NodeAddress } from '../../store/index.js';
import { withBenchValkey } from '../own-valkey.js';
import { BENCH_ADMIN_TOKEN } from '../run/gateway-config.js';

const NODE = 'relay-a';
/** Answers still in flight at a step's end are awaited at most this long. */
const GRACE_MS = 10_000;

export interface AdaptiveWorkBenchOptions {
  multipliers: number[];
  secondsPerStep: number;
  spamConnections: number;
  memberPerSec: number;
  bitsPerHalving: number;
  maxDifficulty: number;
  valkey?: NodeAddress;
}

export const ADAPTIVE_WORK_DEFAULTS: Omit<AdaptiveWorkBenchOptions, 'valkey'> = {
  multipliers: [1, 0.5, 0.25, 0.125],
  secondsPerStep: 8,
  spamConnections: 16,
  memberPerSec: 1,
  bitsPerHalving: 4,
  maxDifficulty: 28,
};

export interface AdaptiveWorkStep {
  adaptive: boolean;
  m: number;
  /** The difficulty the wave mined to (what the node's NIP-11 shows). */
  difficulty: number;
  spam: { sent: number; accepted: number; perSec: number };
  member: { sent: number; accepted: number; perSec: number };
}

/** One WebSocket to the gateway, named by its forwarded address; counts its OKs. */
class Writer {
  accepted = 0;
  answered = 0;
  sent = 0;
  private constructor(private readonly ws: WebSocket) {
    ws.on('message', (data: Buffer) => {
      const msg = JSON.parse(data.toString()) as unknown[];
      if (msg[0] !== 'OK') return;
      this.answered++;
      if (msg[2] === true) this.accepted++;
    });
  }

  static async open(url: string, address: string): Promise<Writer> {
    const ws = new WebSocket(url.replace(/^http/, 'ws'), {
      headers: { 'x-forwarded-for': address },
    });
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
    });
    return new Writer(ws);
  }

  send(eventJson: string): void {
    this.sent++;
    this.ws.send(`["EVENT",${eventJson}]`);
  }

  reset(): void {
    this.accepted = 0;
    this.answered = 0;
    this.sent = 0;
  }

  close(): void {
    this.ws.close();
  }
}

function gatewayConfig(
  relayUrl: string,
  valkey: NodeAddress,
  membersFile: string,
  adaptive: boolean,
  o: AdaptiveWorkBenchOptions,
): Record<string, unknown> {
  return {
    listen: { host: '127.0.0.1', port: 0 },
    admin: { host: '127.0.0.1', port: 0, token: BENCH_ADMIN_TOKEN },
    valkey: { mode: 'standalone', nodes: [`${valkey.host}:${valkey.port}`] },
    upstreams: [{ id: NODE, url: relayUrl }],
    trustedProxies: ['127.0.0.1'],
    logging: { level: 'warn', requests: false },
    workers: 1,
    identity: { order: ['pubkey', 'ip'], pubkeyTiers: { member: membersFile } },
    // The wave's addresses and keys each stay far under their quotas: only work holds it.
    limits: { framesPerSecPerAddress: 100_000 },
    nostr: {
      pow: {
        adaptive: {
          enabled: adaptive,
          bitsPerHalving: o.bitsPerHalving,
          maxDifficulty: o.maxDifficulty,
        },
      },
    },
    quotas: {
      keyPrefix: `bench-adaptive-${Date.now().toString(36)}-${adaptive ? 'on' : 'off'}`,
      tiers: {
        default: { write: { points: 1_000_000, windowSec: 60 } },
        member: { write: { points: 600, windowSec: 60 } },
      },
    },
  };
}

/** Until every event sent has its OK (or the deadline: what is unanswered counts as refused). */
async function allAnswered(writers: Writer[], ms: number): Promise<void> {
  const deadline = performance.now() + ms;
  while (writers.some((w) => w.answered < w.sent) && performance.now() < deadline) {
    await sleep(20);
  }
}

async function setMultiplier(gw: RunningGateway, m: number): Promise<void> {
  const res = await fetch(`${gw.adminUrl}/admin/flow-control`, {
    method: 'POST',
    headers: { authorization: `Bearer ${BENCH_ADMIN_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ nodes: { [NODE]: { multiplier: m } } }),
  });
  if (!res.ok) throw new Error(`flow-control answered ${res.status}: ${await res.text()}`);
}

export async function runAdaptiveWorkBench(
  o: AdaptiveWorkBenchOptions,
  log: (line: string) => void,
): Promise<AdaptiveWorkStep[]> {
  return withBenchValkey('adaptive-work', o.valkey, log, async (valkey, env) => {
    const work = mkdtempSync(path.join(os.tmpdir(), 'sluice-adaptive-work-'));
    const memberSk = generateSecretKey();
    const membersFile = path.join(work, 'members.txt');
    writeFileSync(membersFile, `${getPublicKey(memberSk)}\n`);
    const worker = new Worker(new URL('./spam-worker.js', import.meta.url));
    let relay: SluiceProcess | undefined;
    const steps: AdaptiveWorkStep[] = [];
    try {
      relay = await startRelay({ nodeId: NODE, env });
      for (const adaptive of [false, true]) {
        const gw = await startGateway(
          gatewayConfig(relay.url, valkey, membersFile, adaptive, o),
          path.join(work, `gateway-${adaptive ? 'on' : 'off'}.json`),
          { env },
        );
        const spam = await Promise.all(
          Array.from({ length: o.spamConnections }, (_, i) =>
            Writer.open(gw.url, `10.66.${Math.floor(i / 250)}.${(i % 250) + 1}`),
          ),
        );
        const member = await Writer.open(gw.url, '10.77.0.1');
        let turn = 0;
        let counting = false;
        const onEvent = (json: string) => {
          if (counting) spam[turn++ % spam.length]!.send(json);
        };
        worker.on('message', onEvent);
        try {
          for (const m of o.multipliers) {
            await setMultiplier(gw, m);
            const difficulty = requiredDifficulty(m, 0, {
              enabled: adaptive,
              bitsPerHalving: o.bitsPerHalving,
              maxDifficulty: o.maxDifficulty,
            });
            worker.postMessage({ difficulty });
            // Events mined to the step before's difficulty are still arriving: let them pass.
            await sleep(300);
            for (const w of [...spam, member]) w.reset();
            counting = true;
            const started = performance.now();
            let i = 0;
            while (performance.now() - started < o.secondsPerStep * 1000) {
              const e = finalizeEvent(
                {
                  kind: 1,
                  created_at: Math.floor(Date.now() / 1000),
                  tags: [],
                  content: `member ${m} ${i++}`,
                },
                memberSk,
              );
              member.send(JSON.stringify(e));
              await sleep(1000 / o.memberPerSec);
            }
            counting = false;
            await allAnswered([...spam, member], GRACE_MS);
            const seconds = o.secondsPerStep;
            const sent = spam.reduce((s, w) => s + w.sent, 0);
            const accepted = spam.reduce((s, w) => s + w.accepted, 0);
            const step: AdaptiveWorkStep = {
              adaptive,
              m,
              difficulty,
              spam: { sent, accepted, perSec: accepted / seconds },
              member: {
                sent: member.sent,
                accepted: member.accepted,
                perSec: member.accepted / seconds,
              },
            };
            steps.push(step);
            log(
              `adaptive ${adaptive ? 'on' : 'off'}, m ${m}: difficulty ${difficulty}, wave ` +
                `${step.spam.perSec.toFixed(1)}/s accepted, member ${step.member.accepted}/${member.sent}`,
            );
          }
        } finally {
          worker.off('message', onEvent);
          for (const w of [...spam, member]) w.close();
          await gw.proc.stop();
        }
      }
      return steps;
    } finally {
      await worker.terminate();
      await relay?.stop();
      rmSync(work, { recursive: true, force: true });
    }
  });
}

export function formatAdaptiveWork(steps: AdaptiveWorkStep[]): string {
  const rows = steps.map(
    (s) =>
      `| ${s.adaptive ? 'on' : 'off'} | ${s.m} | ${s.difficulty} | ${s.spam.perSec.toFixed(1)} (${s.spam.accepted} / ${s.spam.sent}) | ${s.member.perSec.toFixed(2)} (${s.member.accepted} / ${s.member.sent}) |`,
  );
  return [
    '| adaptive work | multiplier | difficulty asked of the wave | wave accepted /s (accepted / sent) | member accepted /s (accepted / sent) |',
    '| --- | --- | --- | --- | --- |',
    ...rows,
  ].join('\n');
}
