/**
 * Attack: hold the gateway's (and through it the relay's) connections by being slow on
 * purpose: headers trickled a line at a time (slowloris), a connection that never sends a
 * byte, a body promised by Content-Length and never finished, a body abandoned half way, an
 * idle keep-alive connection. Each is closed within its configured bound, and a half-sent
 * body never holds the relay's connection: the stand-in relay here counts the bodies still
 * arriving, which must come back to zero. WebSockets, long-lived by design, are not cut. A
 * relay that never answers is cut off too (504 at the upstream timeout), and blamed.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { WebSocket } from 'ws';
import { request, startGateway } from '../helpers/gateway.js';
import type { GatewayUnderTest } from '../helpers/gateway.js';
import { RawConnection } from '../helpers/raw-http.js';
import { RecordingUpstream } from '../helpers/recording-upstream.js';

const HEADERS_TIMEOUT = 1000;
const REQUEST_TIMEOUT = 2000;
const KEEP_ALIVE_TIMEOUT = 1000;
const UPSTREAM_TIMEOUT = 1000;
/** Node enforces the timeouts on a periodic sweep, and the test's own scheduling: slack. */
const SLACK = 1500;

async function upstreamErrors(gw: GatewayUnderTest): Promise<number> {
  const text = (await request(`${gw.adminUrl}/metrics`)).body;
  return text
    .split('\n')
    .filter((line) => line.startsWith('sluice_upstream_errors_total'))
    .reduce((sum, line) => sum + Number(line.split(' ').pop()), 0);
}

async function until(what: string, predicate: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

describe('slow and abandoned requests are bounded', { timeout: 60_000 }, () => {
  let upstream: RecordingUpstream;
  let gw: GatewayUnderTest;

  before(async () => {
    upstream = await RecordingUpstream.start();
    gw = await startGateway('iovalkey', 'standalone', [{ id: 'recorder', url: upstream.url }], {
      quotas: { keyPrefix: `slow${Date.now().toString(36)}` },
      limits: {
        headersTimeoutMs: HEADERS_TIMEOUT,
        requestTimeoutMs: REQUEST_TIMEOUT,
        keepAliveTimeoutMs: KEEP_ALIVE_TIMEOUT,
        upstreamTimeoutMs: UPSTREAM_TIMEOUT,
      },
      healthCheck: { intervalMs: 500, failuresToDown: 3 },
    });
  });

  after(async () => {
    await gw?.proc.stop();
    await upstream?.close();
  });

  it('slowloris: headers trickled a line at a time are cut off at the header timeout', async () => {
    const conn = await RawConnection.open(gw.url, '127.0.40.2');
    conn.write('GET / HTTP/1.1\r\nHost: x\r\n');
    let line = 0;
    const trickle = setInterval(() => conn.write(`X-Slow-${line++}: y\r\n`), 100);
    try {
      const openFor = await conn.untilClosed(HEADERS_TIMEOUT + SLACK);
      assert.ok(openFor >= HEADERS_TIMEOUT - 100, `closed after ${openFor} ms`);
      assert.match(conn.pending(), /408/);
    } finally {
      clearInterval(trickle);
      conn.destroy();
    }
  });

  it('a connection that never sends a byte is closed at the header timeout', async () => {
    const conn = await RawConnection.open(gw.url, '127.0.40.3');
    await conn.untilClosed(HEADERS_TIMEOUT + SLACK);
  });

  it('a body promised and never finished: 408 at the request timeout, the relay released', async () => {
    const conn = await RawConnection.open(gw.url, '127.0.40.4');
    conn.write(
      'POST /stalled HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n' +
        'Content-Length: 100000\r\n\r\n{"half":"',
    );
    await until('the relay to see the request', () => !!upstream.last('/stalled'), 5000);
    assert.equal(upstream.bodiesInProgress, 1);
    const openFor = await conn.untilClosed(REQUEST_TIMEOUT + SLACK);
    assert.ok(openFor >= REQUEST_TIMEOUT - 100, `closed after ${openFor} ms`);
    assert.match(conn.pending(), /408/);
    await until('the relay connection to be released', () => upstream.bodiesInProgress === 0, 2000);
    assert.equal(await upstreamErrors(gw), 0, 'a stalled client is not the relay failing');
  });

  it('a body abandoned half way: the relay request is cancelled at once', async () => {
    const conn = await RawConnection.open(gw.url, '127.0.40.5');
    conn.write(
      'POST /abandoned HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n' +
        'Content-Length: 100000\r\n\r\n{"half":"',
    );
    await until('the relay to see the request', () => !!upstream.last('/abandoned'), 5000);
    const goneAt = Date.now();
    conn.destroy();
    await until('the relay connection to be released', () => upstream.bodiesInProgress === 0, 1000);
    assert.ok(Date.now() - goneAt < REQUEST_TIMEOUT, 'released before any timeout would do it');
    assert.equal(await upstreamErrors(gw), 0, 'a client gone is not the relay failing');
  });

  it('a chunked body abandoned half way: the relay request is cancelled at once', async () => {
    const conn = await RawConnection.open(gw.url, '127.0.40.7');
    conn.write(
      'POST /abandoned-chunked HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n' +
        'Transfer-Encoding: chunked\r\n\r\n9\r\n{"half":"\r\n',
    );
    await until('the relay to see the request', () => !!upstream.last('/abandoned-chunked'), 5000);
    const goneAt = Date.now();
    conn.destroy();
    await until('the relay connection to be released', () => upstream.bodiesInProgress === 0, 1000);
    assert.ok(Date.now() - goneAt < REQUEST_TIMEOUT, 'released before any timeout would do it');
    assert.equal(await upstreamErrors(gw), 0, 'a client gone is not the relay failing');
  });

  it('an idle keep-alive connection is closed at the keep-alive timeout', async () => {
    const conn = await RawConnection.open(gw.url, '127.0.40.6');
    conn.write('GET /idle HTTP/1.1\r\nHost: x\r\n\r\n');
    assert.equal((await conn.response()).status, 200);
    const answeredAt = Date.now();
    await conn.untilClosed(KEEP_ALIVE_TIMEOUT + SLACK + 1000);
    assert.ok(Date.now() - answeredAt >= KEEP_ALIVE_TIMEOUT - 100);
  });

  it('a relay that never answers: 504 at the upstream timeout, and that one is its failure', async () => {
    const errorsBefore = await upstreamErrors(gw);
    const startedAt = Date.now();
    const res = await request(`${gw.url}/hang`, { from: '127.0.40.8' });
    assert.equal(res.status, 504, res.body);
    assert.ok(Date.now() - startedAt >= UPSTREAM_TIMEOUT - 100);
    assert.equal(await upstreamErrors(gw), errorsBefore + 1);
  });

  it('a WebSocket outlives the request and header timeouts', async () => {
    const ws = new WebSocket(gw.url.replace(/^http/, 'ws'), { localAddress: '127.0.40.7' });
    await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
    try {
      // Past every listener timeout, the connection still carries messages both ways.
      await new Promise((resolve) => setTimeout(resolve, REQUEST_TIMEOUT + SLACK));
      assert.equal(ws.readyState, WebSocket.OPEN);
      const echoed = new Promise<string>((resolve) =>
        ws.once('message', (data: Buffer) => resolve(data.toString('utf8'))),
      );
      ws.send('["REQ","still-here",{}]');
      assert.equal(await echoed, '["REQ","still-here",{}]');
    } finally {
      ws.close();
    }
  });
});
