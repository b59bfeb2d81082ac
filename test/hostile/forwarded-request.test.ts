/**
 * Attack: make the gateway forward what it should not. An absolute-form target must reach the
 * relay as the origin-form path the gateway judged; a client's credentials (the API key
 * header, Authorization, Proxy-Authorization) must not reach a relay unless the operator
 * says so; hop-by-hop headers stay on their hop; and the client cannot choose the
 * X-Forwarded-For, X-Forwarded-Proto, Forwarded or X-Real-IP the relay sees. The relay here
 * is a recording stand-in, so the test sees exactly what arrived.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startGateway } from '../helpers/gateway.js';
import type { GatewayUnderTest } from '../helpers/gateway.js';
import { signedEvent } from '../helpers/nostr-events.js';
import { rawRequest } from '../helpers/raw-http.js';
import { RecordingUpstream } from '../helpers/recording-upstream.js';

const SECRET_HEADERS = [
  'X-Api-Key: premium-key-1',
  'Authorization: Bearer client-secret',
  'Proxy-Authorization: Basic cHJveHk6c2VjcmV0',
];

const SPOOFED_CLAIMS = [
  'X-Forwarded-For: 6.6.6.6',
  'X-Forwarded-Proto: https',
  'X-Forwarded-Host: evil.example',
  'Forwarded: for=6.6.6.6;proto=https',
  'X-Real-IP: 6.6.6.6',
];

const HOP_BY_HOP = [
  'Connection: keep-alive, X-Custom-Hop',
  'X-Custom-Hop: for the gateway only',
  'Keep-Alive: timeout=5',
  'Proxy-Connection: keep-alive',
  'TE: trailers',
  'Trailer: X-Checksum',
];

function get(target: string, headers: string[]): string {
  return [`GET ${target} HTTP/1.1`, 'Host: gateway.test', ...headers, '', ''].join('\r\n');
}

describe('what the relay is sent', { timeout: 60_000 }, () => {
  let upstream: RecordingUpstream;
  let plain: GatewayUnderTest;
  let behindProxy: GatewayUnderTest;

  before(async () => {
    upstream = await RecordingUpstream.start();
    const quotas = {
      keyPrefix: `fwd${Date.now().toString(36)}`,
      apiKeys: { 'premium-key-1': 'premium' },
      tiers: {
        default: { write: { points: 100, windowSec: 60 } },
        premium: { write: { points: 200, windowSec: 60 } },
      },
    };
    const upstreams = [{ id: 'recorder', url: upstream.url }];
    [plain, behindProxy] = await Promise.all([
      startGateway('iovalkey', 'standalone', upstreams, { quotas }),
      startGateway('iovalkey', 'standalone', upstreams, {
        quotas,
        trustedProxies: ['127.0.0.1'],
        identity: { forwardCredentials: ['Authorization', 'x-api-key'] },
      }),
    ]);
  });

  after(async () => {
    await Promise.allSettled([plain?.proc.stop(), behindProxy?.proc.stop()]);
    await upstream?.close();
  });

  it('forwards an absolute-form target as the origin-form path it judged', async () => {
    const res = await rawRequest(plain.url, get('http://evil.example:81/a/./b/../c?q=1', []));
    assert.equal(res.status, 200, res.body);
    const seen = upstream.last('/a/c?q=1');
    assert.ok(seen, `the relay got: ${JSON.stringify(upstream.requests.map((r) => r.url))}`);
    assert.equal(seen.headers.host, new URL(upstream.url).host, 'Host names the relay');
  });

  it('answers 400 for a target that cannot be forwarded as sent, and forwards nothing', async () => {
    const before = upstream.requests.length;
    const res = await rawRequest(plain.url, get('/a%2F..%2Fb', []));
    assert.equal(res.status, 400, res.body);
    assert.equal(upstream.requests.length, before);
  });

  it('keeps credentials, hop-by-hop headers and spoofed client claims from the relay', async () => {
    const headers = [...SECRET_HEADERS, ...SPOOFED_CLAIMS, ...HOP_BY_HOP];
    const res = await rawRequest(plain.url, get('/plain', headers), '127.0.20.5');
    assert.equal(res.status, 200, res.body);
    assert.equal(res.headers['x-hop'], undefined, "the relay's hop-by-hop header stays with it");

    const seen = upstream.last('/plain')!.headers;
    for (const name of [
      'x-api-key',
      'authorization',
      'proxy-authorization',
      'forwarded',
      'x-real-ip',
      'x-forwarded-host',
      'x-custom-hop',
      'keep-alive',
      'proxy-connection',
      'te',
      'trailer',
    ]) {
      assert.equal(seen[name], undefined, `${name} must not reach the relay`);
    }
    assert.equal(seen['x-forwarded-for'], '127.0.20.5', 'XFF is the peer the gateway saw');
    assert.equal(seen['x-forwarded-proto'], 'http');
  });

  it('passes configured credentials, and believes a trusted proxy about the client', async () => {
    const headers = [
      ...SECRET_HEADERS,
      'X-Forwarded-For: 203.0.113.9',
      'X-Forwarded-Proto: https',
      'Keep-Alive: 1',
    ];
    const res = await rawRequest(behindProxy.url, get('/trusted', headers));
    assert.equal(res.status, 200, res.body);

    const seen = upstream.last('/trusted')!.headers;
    assert.equal(seen['x-api-key'], 'premium-key-1');
    assert.equal(seen.authorization, 'Bearer client-secret');
    assert.equal(seen['proxy-authorization'], undefined, 'meant for a proxy, never forwarded');
    assert.equal(seen['keep-alive'], undefined);
    assert.equal(seen['x-forwarded-for'], '203.0.113.9, 127.0.0.1');
    assert.equal(seen['x-forwarded-proto'], 'https');
  });

  it('sends a body as it came: an event read whole, its type as the client gave it or none', async () => {
    const cases = [
      { path: '/events', type: 'application/json', chunked: false },
      { path: '/events', type: undefined, chunked: false },
      { path: '/events', type: 'text/plain; charset=utf-8', chunked: true },
      { path: '/streamed', type: 'application/octet-stream', chunked: false },
      { path: '/streamed', type: undefined, chunked: true },
    ];
    for (const [i, c] of cases.entries()) {
      const body = JSON.stringify(signedEvent(1, `forwarded body ${i}`));
      const framing = c.chunked
        ? [
            'Transfer-Encoding: chunked',
            '',
            `${Buffer.byteLength(body).toString(16)}\r\n${body}\r\n0\r\n\r\n`,
          ]
        : [`Content-Length: ${Buffer.byteLength(body)}`, '', body];
      const text = [
        `POST ${c.path}?case=${i} HTTP/1.1`,
        'Host: gateway.test',
        ...(c.type ? [`Content-Type: ${c.type}`] : []),
        ...framing,
      ].join('\r\n');
      const res = await rawRequest(plain.url, text, `127.0.21.${i + 1}`);
      assert.equal(res.status, 200, `case ${i}: ${res.body}`);
      const seen = upstream.last(`${c.path}?case=${i}`);
      assert.ok(seen, `case ${i} reached the relay`);
      assert.equal(seen.body.toString(), body, `case ${i}: the body as sent`);
      assert.equal(seen.headers['content-type'], c.type, `case ${i}: the client's type`);
      if (seen.headers['content-length'] !== undefined) {
        assert.equal(Number(seen.headers['content-length']), Buffer.byteLength(body), `case ${i}`);
      }
    }
  });
});
