/**
 * Attack: reach the admin API without its token by spelling the path another way. The router
 * decodes `%XX` and strips absolute-form origins, so a token check on the raw URL let
 * `/%61dmin/flow-control` through. The check now follows the route that matched: every
 * spelling either matches an admin route (and needs the token) or matches nothing (404).
 */
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import { ADMIN_TOKEN, admin, startGateway } from '../helpers/gateway.js';
import type { GatewayUnderTest } from '../helpers/gateway.js';
import { startRelay } from '../helpers/processes.js';
import type { RelayProcess } from '../helpers/processes.js';
import { rawRequest } from '../helpers/raw-http.js';

/** Other spellings of GET /admin/flow-control (and of the other admin routes). */
const SPELLINGS = [
  '/%61dmin/flow-control',
  '/%61%64%6d%69%6e/%66low-control',
  '/admin/flow%2Dcontrol',
  '/admin%2Fflow-control',
  '/%2Fadmin/flow-control',
  'http://x/admin/flow-control',
  'HTTP://127.0.0.1/admin/flow-control',
  'https://x/%61dmin/flow-control',
  '//admin/flow-control',
  '/admin//flow-control',
  '/ADMIN/flow-control',
  '/Admin/Flow-Control',
  '/admin/flow-control/',
  '/admin/flow-control?x=1',
  '/metrics/../admin/flow-control',
  '/healthz/../admin/flow-control',
  '/./admin/flow-control',
  '/admin/./flow-control',
  '/%2e/admin/flow-control',
  '/metrics/%2e%2e/admin/flow-control',
  '/admin/valkey',
  '/%61dmin/valkey',
  '/admin/flow-control/law',
  '/%61dmin/flow-control/law',
  '/admin/clients/ip:127.0.0.1',
  '/%61dmin/clients/ip%3A127.0.0.1',
];

function get(target: string, headers = ''): string {
  return `GET ${target} HTTP/1.1\r\nHost: x\r\n${headers}Connection: close\r\n\r\n`;
}

/** The status line's code of the answer to one raw request (HEAD answers have no body). */
function statusOf(url: string, text: string, timeoutMs = 10_000): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: hostname, port: Number(port) });
    let head = '';
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no answer in ${timeoutMs} ms: ${JSON.stringify(head)}`));
    }, timeoutMs);
    const done = (result: string) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(result);
    };
    socket.on('connect', () => socket.write(text));
    socket.on('data', (chunk: Buffer) => {
      head += chunk.toString('latin1');
      const status = /^HTTP\/1\.[01] (\d{3})/.exec(head)?.[1];
      if (status && head.includes('\r\n\r\n')) done(`${status} ${head.split('\r\n\r\n')[1]}`);
    });
    socket.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    socket.on('close', () => done(head ? `closed: ${head}` : 'closed without an answer'));
  });
}

describe('the admin listener, whatever the spelling', { timeout: 60_000 }, () => {
  let relay: RelayProcess;
  let gw: GatewayUnderTest;

  before(async () => {
    relay = await startRelay({ nodeId: 'relay-a' });
    gw = await startGateway('iovalkey', 'standalone', [{ id: 'relay-a', url: relay.url }], {
      quotas: { keyPrefix: `spelling${Date.now().toString(36)}` },
    });
  });

  after(async () => {
    await gw?.proc.stop();
    await relay?.stop();
  });

  it('answers every spelling of an admin route 401 or 404 without the token', async () => {
    for (const target of SPELLINGS) {
      for (const method of ['GET', 'HEAD']) {
        const answer = await statusOf(gw.adminUrl, get(target).replace(/^GET/, method));
        assert.match(answer, /^40[14] /, `${method} ${target}: ${answer.slice(0, 200)}`);
      }
    }
  });

  it('refuses a wrong token whatever the spelling', async () => {
    for (const target of ['/%61dmin/flow-control', 'http://x/admin/flow-control']) {
      const res = await rawRequest(gw.adminUrl, get(target, 'Authorization: Bearer wrong\r\n'));
      assert.equal(res.status, 401, target);
    }
  });

  it('applies no change posted to another spelling without the token', async () => {
    const tiers = async () =>
      (JSON.parse((await admin(gw, 'GET', '/admin/flow-control')).body) as { tiers: unknown })
        .tiers;
    const before = await tiers();
    const body = JSON.stringify({ tiers: { default: { write: { points: 1, windowSec: 1 } } } });
    for (const target of ['/%61dmin/flow-control', 'http://x/admin/flow-control']) {
      const res = await rawRequest(
        gw.adminUrl,
        `POST ${target} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n` +
          `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
      );
      assert.equal(res.status, 401, `${target}: ${res.body.slice(0, 200)}`);
    }
    assert.deepEqual(await tiers(), before);
  });

  it('serves the canonical path with the token, and the open routes without it', async () => {
    const withToken = await rawRequest(
      gw.adminUrl,
      get('/admin/flow-control', `Authorization: Bearer ${ADMIN_TOKEN}\r\n`),
    );
    assert.equal(withToken.status, 200, withToken.body.slice(0, 200));
    assert.ok((JSON.parse(withToken.body) as { tiers?: unknown }).tiers);
    for (const open of ['/metrics', '/healthz', '/readyz']) {
      const res = await rawRequest(gw.adminUrl, get(open));
      assert.equal(res.status, 200, `${open}: ${res.body.slice(0, 200)}`);
    }
  });
});
