/**
 * Attack: take healthy relays out of rotation with requests the upstream HTTP library refuses
 * (Keep-Alive, Expect, a bare Upgrade header...), requests the relay answers 4xx, bodies over
 * the limit and abandoned bodies. Only a relay's own failures (refused, reset, timed out) may
 * count against its health: after hundreds of such requests over raw sockets, the relay is
 * still in rotation, other clients are served and the gateway is ready.
 */
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { blameOf } from '../../src/gateway/upstream-io.js';
import { request, suiteRelayAndGateway } from '../helpers/gateway.js';
import type { GatewayUnderTest } from '../helpers/gateway.js';
import { unusedPort } from '../helpers/env.js';
import { RawConnection } from '../helpers/raw-http.js';

const PER_HEADER = 200;
const MAX_BODY = 4096;

/** Requests a client can send that the relay is not to blame for, with the answer expected. */
const CLIENT_REQUESTS: { name: string; text: string; status: number }[] = [
  {
    name: 'Keep-Alive: 1',
    text: 'GET / HTTP/1.1\r\nHost: x\r\nKeep-Alive: 1\r\n\r\n',
    status: 200,
  },
  {
    name: 'Expect: 100-continue',
    text: 'GET / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n\r\n',
    status: 200,
  },
  {
    name: 'a bare Upgrade',
    text: 'GET / HTTP/1.1\r\nHost: x\r\nUpgrade: h2c\r\n\r\n',
    status: 200,
  },
  { name: 'TE: trailers', text: 'GET / HTTP/1.1\r\nHost: x\r\nTE: trailers\r\n\r\n', status: 200 },
  {
    name: 'Proxy-Connection',
    text: 'GET / HTTP/1.1\r\nHost: x\r\nProxy-Connection: keep-alive\r\n\r\n',
    status: 200,
  },
  {
    name: 'a chunked body',
    text: 'POST /events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n',
    status: 400,
  },
  {
    name: 'a path the relay answers 404',
    text: 'GET /no-such-page HTTP/1.1\r\nHost: x\r\n\r\n',
    status: 404,
  },
];

/** Sum of one metric over its label sets, read from the admin listener. */
async function metric(gw: GatewayUnderTest, name: string, label = ''): Promise<number> {
  const text = (await request(`${gw.adminUrl}/metrics`)).body;
  return text
    .split('\n')
    .filter((line) => line.startsWith(name) && line.includes(label))
    .reduce((sum, line) => sum + Number(line.split(' ').pop()), 0);
}

describe('only a relay’s own failures count against its health', { timeout: 120_000 }, () => {
  const suite = suiteRelayAndGateway({
    quotas: {
      keyPrefix: `blame${Date.now().toString(36)}`,
      tiers: { default: { write: { points: 10_000, windowSec: 60 } } },
    },
    limits: { maxBodyBytes: MAX_BODY },
  });
  let gw: GatewayUnderTest;
  before(() => {
    gw = suite.gw();
  });

  for (const [i, attack] of CLIENT_REQUESTS.entries()) {
    it(`${PER_HEADER} requests with ${attack.name}: answered, never held against the relay`, async () => {
      const conn = await RawConnection.open(gw.url, `127.0.30.${i + 2}`);
      try {
        for (let n = 0; n < PER_HEADER; n++) {
          conn.write(attack.text);
          const res = await conn.response();
          assert.equal(res.status, attack.status, `request ${n}: ${res.status} ${res.body}`);
        }
      } finally {
        conn.destroy();
      }
      assert.equal(await metric(gw, 'sluice_upstream_errors_total'), 0);
      assert.equal(await metric(gw, 'sluice_upstream_up', 'relay-a'), 1);
    });
  }

  it('bodies over the limit and abandoned bodies are the client’s doing', async () => {
    for (let n = 0; n < 50; n++) {
      const conn = await RawConnection.open(gw.url, '127.0.30.50');
      const chunk = 'x'.repeat(1024);
      conn.write('POST /events HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n');
      for (let c = 0; c < 6; c++) conn.write(`400\r\n${chunk}\r\n`);
      conn.write('0\r\n\r\n');
      const res = await conn.response();
      assert.equal(res.status, 413, res.body);
      conn.destroy();
    }
    for (let n = 0; n < 50; n++) {
      const conn = await RawConnection.open(gw.url, '127.0.30.51');
      conn.write('POST /events HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{"half":');
      // Gone before its body: give the gateway a moment to start forwarding, then drop.
      await new Promise((resolve) => setImmediate(resolve));
      conn.destroy();
    }
    assert.equal(await metric(gw, 'sluice_upstream_errors_total'), 0);
  });

  it('afterwards, other clients are served and the gateway is ready', async () => {
    const res = await request(`${gw.url}/`, { from: '127.0.30.99' });
    assert.equal(res.status, 200, res.body);
    const ready = await request(`${gw.adminUrl}/readyz`);
    assert.equal(ready.status, 200, ready.body);
    assert.equal(await metric(gw, 'sluice_upstream_up', 'relay-a'), 1);
  });

  it('a relay that refuses connections is blamed (by error code, not message)', async () => {
    const refused = await fetch(`http://127.0.0.1:${await unusedPort()}/`).catch((e: unknown) => e);
    assert.deepEqual(blameOf(refused), { party: 'relay', timeout: false });
    const wrapped = Object.assign(new Error('Connect Timeout Error'), {
      code: 'FST_REPLY_FROM_INTERNAL_SERVER_ERROR',
      cause: Object.assign(new Error('whatever'), { code: 'UND_ERR_HEADERS_TIMEOUT' }),
    });
    assert.deepEqual(blameOf(wrapped), { party: 'relay', timeout: true });
    const refusedHeader = Object.assign(new Error('x'), {
      code: 'FST_REPLY_FROM_INTERNAL_SERVER_ERROR',
      cause: Object.assign(new Error('invalid keep-alive header'), { code: 'UND_ERR_INVALID_ARG' }),
    });
    assert.deepEqual(blameOf(refusedHeader), { party: 'client', reason: 'refused' });
    assert.deepEqual(blameOf(new Error('connect ECONNREFUSED')), { party: 'unknown' });
  });
});
