/**
 * The open-loop generator: it keeps the offered rate, and a stalled server's queueing shows
 * in its latency (measured from each request's intended send time), where a closed loop
 * would stop sending and hide it.
 *
 * Real sockets and the wall clock (the rates are per real second): it runs with the
 * integration files, one at a time, not beside another unit file competing for the CPU.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, describe, it } from 'node:test';
import { runArrivalLoad } from '../../src/bench/run/arrival-load.js';

const servers: http.Server[] = [];

async function serve(handler: http.RequestListener): Promise<string> {
  const server = http.createServer(handler);
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

function answer(res: http.ServerResponse, status = 200): void {
  res.writeHead(status, { 'content-type': 'application/json' }).end('{}');
}

const load = (url: string, rate: number, connections: number, durationSec: number) =>
  runArrivalLoad({
    url,
    rate,
    connections,
    durationSec,
    bodyFor: () => '{"n":1}',
    headersFor: () => ({}),
  });

describe('arrival-rate load', { timeout: 60_000 }, () => {
  after(() => {
    for (const s of servers) s.close();
  });

  it('offers the rate it is given to a server that keeps up', async () => {
    const url = await serve((req, res) => {
      req.resume();
      req.on('end', () => answer(res));
    });
    const r = await load(url, 500, 16, 2);
    assert.equal(r.load.mode, 'arrival');
    // Bounds wide enough for a machine busy with other work (the suite must pass beside a
    // benchmark): what is checked is that the rate is offered, not how precisely.
    assert.ok(Math.abs(r.counts.requests - 1000) <= 200, `${r.counts.requests} of ~1000 sent`);
    assert.ok(Math.abs(r.load.achievedRate - 500) <= 100, `achieved ${r.load.achievedRate}/s`);
    assert.equal(r.counts.errors, 0);
    assert.equal(r.load.unsent, 0);
    assert.equal(r.counts.ok2xx, r.counts.requests);
    // No stall, so no queueing: far below the stall test's waits even on a busy machine.
    assert.ok(r.latencyMs && r.latencyMs.p50 < 200, `p50 ${r.latencyMs?.p50} ms`);
  });

  it('measures the queueing behind a stall from the intended send times', async () => {
    // Every answer between 0.5 s and 0.8 s after the first request is held until 0.8 s.
    let first = 0;
    const url = await serve((req, res) => {
      req.resume();
      req.on('end', () => {
        const now = Date.now();
        first ||= now;
        const releaseAt = first + 800;
        if (now - first >= 500 && now < releaseAt) setTimeout(() => answer(res), releaseAt - now);
        else answer(res);
      });
    });
    const r = await load(url, 200, 4, 1.5);
    assert.equal(r.load.unsent, 0);
    assert.ok(r.load.late > 10, `requests due during the stall waited for a slot: ${r.load.late}`);
    // The held requests waited ~300 ms; the ~60 due behind them waited for a free slot, and
    // that wait counts: measured from their actual send, p90 would be ~1 ms.
    assert.ok(r.latencyMs!.max >= 250, `max ${r.latencyMs!.max} ms`);
    assert.ok(r.latencyMs!.p90 >= 50, `p90 ${r.latencyMs!.p90} ms`);
  });

  it('counts 429s and other statuses apart', async () => {
    let n = 0;
    const url = await serve((req, res) => {
      req.resume();
      req.on('end', () => answer(res, ++n % 3 === 0 ? 429 : n % 3 === 1 ? 200 : 503));
    });
    const r = await load(url, 300, 8, 1);
    const third = r.counts.requests / 3;
    assert.ok(Math.abs(r.counts.limited429 - third) <= 2, JSON.stringify(r.counts));
    assert.ok(
      Math.abs((r.counts.otherStatuses['503'] ?? 0) - third) <= 2,
      JSON.stringify(r.counts),
    );
    assert.equal(r.counts.ok2xx + r.counts.limited429 + r.counts.otherNon2xx, r.counts.requests);
  });
});
