/**
 * The read workload (`nostr-reads`): pages of stored notes asked over and over, through the
 * gateway with its shipped client and alone against a real reference relay, every page whole;
 * and the load's own counting against a scripted relay that answers short, late, with CLOSED
 * or not at all, over real sockets.
 */
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { WebSocketServer } from 'ws';
import type { WebSocket } from 'ws';
import { READS, runFileName } from '../../src/bench/run/config.js';
import type { RunConfig } from '../../src/bench/run/config.js';
import { RunFileSchema } from '../../src/bench/run/result-schema.js';
import { runOnce } from '../../src/bench/run/runner.js';
import { STALL_MS, runNostrReads } from '../../src/bench/ws-read-load.js';
import { parseNodeAddress } from '../../src/store/options.js';
import { nostrRunConfig } from '../helpers/run-config.js';
import '../helpers/signals.js';

const VALKEY = process.env.SLUICE_TEST_STANDALONE;

/** A short read run: a fresh reference relay per run, no fresh events (nothing is written). */
const readsConfig = (over: Partial<RunConfig>): RunConfig =>
  nostrRunConfig({ workload: 'nostr-reads', warmupSec: 1, seed: 3, freshEvents: null, ...over });

describe('nostr-reads through bench run, reference relay', { timeout: 180_000 }, () => {
  for (const implementation of ['relay-alone', 'iovalkey+lease'] as const) {
    it(
      `${implementation}: every REQ answered with a whole page, the CPU per REQ sampled`,
      { skip: VALKEY ? false : 'SLUICE_TEST_STANDALONE is not set' },
      async () => {
        const cfg = readsConfig({
          implementation,
          client: implementation === 'relay-alone' ? null : 'iovalkey',
        });
        const lines: string[] = [];
        const r = await runOnce(cfg, { valkey: parseNodeAddress(VALKEY!) }, (l) => lines.push(l));
        assert.equal(r.status, 'ok', `${r.failureReasons.join('; ')}\n${lines.join('\n')}`);
        assert.ok(
          lines.some((l) => l.includes(`${READS.stored} events stored`)),
          lines.join('\n'),
        );
        const c = r.counts!;
        assert.ok(c.requests > 10, JSON.stringify(c));
        assert.equal(c.timeouts, 0);
        assert.equal(c.errors, 0);
        // Every page the relay holds is whole, and the gateway passes all of it on.
        assert.deepEqual(
          { ...r.reads, eventsPerSec: undefined },
          {
            stored: READS.stored,
            limit: READS.limit,
            events: c.requests * READS.limit,
            eventsPerSec: undefined,
          },
        );
        const roles = r.processes.map((p) => p.role);
        assert.ok(roles.includes('relay'), JSON.stringify(roles));
        assert.equal(roles.includes('gateway'), implementation !== 'relay-alone');
        for (const p of r.processes.filter((x) => x.role !== 'valkey')) {
          assert.ok((p.cpuMsPerRequest ?? 0) > 0, JSON.stringify(p));
        }
        assert.ok(RunFileSchema.safeParse(r).success);
        assert.equal(runFileName(cfg), `${implementation}_standalone_nostr-reads_4c_2s_run1.json`);
      },
    );
  }
});

/**
 * A relay that holds nothing but answers each REQ as told: `events` EVENT frames (with a frame
 * of another subscription first), then EOSE; CLOSED; or nothing.
 */
type Answer = { events: number } | { closed: string } | 'never';

describe('the read load counts what the relay answered', { timeout: 60_000 }, () => {
  let wss: WebSocketServer;
  let url: string;
  let answer: Answer = { events: READS.limit };
  const reqs: unknown[][] = [];
  const closes: string[] = [];
  before(async () => {
    wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
    await new Promise((r) => wss.once('listening', r));
    url = `ws://127.0.0.1:${(wss.address() as AddressInfo).port}`;
    wss.on('connection', (ws: WebSocket) => {
      ws.on('message', (data) => {
        const msg = JSON.parse((data as Buffer).toString('utf8')) as unknown[];
        if (msg[0] === 'CLOSE') return void closes.push(msg[1] as string);
        reqs.push(msg);
        const sub = msg[1] as string;
        if (answer === 'never') return;
        if ('closed' in answer) return ws.send(JSON.stringify(['CLOSED', sub, answer.closed]));
        ws.send(JSON.stringify(['EVENT', `other-${sub}`, { id: 'x' }]));
        for (let i = 0; i < answer.events; i++) ws.send(JSON.stringify(['EVENT', sub, { i }]));
        ws.send(JSON.stringify(['EOSE', sub]));
      });
    });
  });
  after(async () => {
    for (const c of wss.clients) c.terminate();
    await new Promise((r) => wss.close(r));
  });

  const load = (durationSec = 0.5) =>
    runNostrReads({
      url,
      connections: 2,
      durationSec,
      stored: { count: 200, firstCreatedAt: 1000 },
      limit: 50,
      seed: 1,
      headersFor: () => ({}),
    });

  it('whole pages: one REQ at a time a connection, a page anywhere in what is stored, each closed', async () => {
    answer = { events: 50 };
    reqs.length = 0;
    closes.length = 0;
    const r = await load();
    assert.ok(r.counts.requests > 4, JSON.stringify(r.counts));
    // Only the subscription's own frames count: the other subscription's EVENT does not.
    assert.equal(r.counts.events, 50 * r.counts.requests);
    assert.equal(r.counts.short, 0);
    assert.equal(r.latencyMs!.max >= r.latencyMs!.p50, true);
    const ids = reqs.map((m) => m[1]);
    assert.equal(new Set(ids).size, ids.length, 'every REQ under a new subscription id');
    for (const [, , filter] of reqs as [string, string, { until: number; limit: number }][]) {
      assert.equal(filter.limit, 50);
      assert.ok(filter.until >= 1049 && filter.until <= 1199, `until ${filter.until}`);
    }
    assert.ok(new Set(reqs.map((m) => (m[2] as { until: number }).until)).size > 1);
    // Each answered page is closed before the next REQ.
    assert.ok(closes.length >= r.counts.requests, `${closes.length} CLOSEs`);
  });

  it('a short page is counted short; CLOSED rate-limited and other CLOSED apart', async () => {
    answer = { events: 49 };
    const short = await load();
    assert.ok(short.counts.requests > 0);
    assert.equal(short.counts.short, short.counts.requests);
    answer = { closed: 'rate-limited: slow down' };
    const limited = await load();
    assert.ok(limited.counts.limited > 0);
    assert.equal(limited.counts.requests, 0);
    assert.equal(limited.counts.closed, 0);
    answer = { closed: 'error: shutting down' };
    const closed = await load();
    assert.ok(closed.counts.closed > 0);
    assert.equal(closed.counts.limited, 0);
  });

  it('a REQ never finished is a timeout after STALL_MS, and its connection asks the next', async () => {
    answer = 'never';
    reqs.length = 0;
    const r = await load(STALL_MS / 1000 + 0.6);
    assert.equal(r.counts.requests, 0);
    // Two connections, each timed out once and asked again.
    assert.equal(r.counts.timeouts, 2);
    assert.equal(reqs.length, 4);
    assert.equal(r.counts.errors, 0);
  });
});
