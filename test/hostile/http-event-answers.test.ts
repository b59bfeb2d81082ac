/**
 * The gateway reads the relay's answer to an event written over POST /events (to give its
 * author the charge back on `duplicate:`). Attack it from both ends: a relay answer cut
 * mid-body, one too long to read, one of unknown length, and a client replaying events into
 * them. The client gets what the relay sent (or a 502 for a cut answer, never a 429), the
 * author is given back only what a whole short answer says was not stored, and other
 * clients are served throughout.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { getPublicKey, generateSecretKey } from 'nostr-tools/pure';
import type { Event } from 'nostr-tools/pure';
import { request, startGateway, writesConsumed } from '../helpers/gateway.js';
import type { GatewayUnderTest } from '../helpers/gateway.js';
import { signedEvent } from '../helpers/nostr-events.js';
import { waitFor } from '../helpers/raw-socket.js';

const LONG = 70 * 1024; // past the 64 KiB the gateway reads whole

/** A relay whose answer to POST /events is picked by the event's content. */
function answeringRelay(): http.Server {
  return http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method !== 'POST') return res.end('ok');
      const { content } = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Event;
      const dup = '{"accepted":true,"message":"duplicate: already have this event"}';
      if (content.startsWith('cut')) {
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': '200' });
        res.write('{"accepted":true,"message":"dupl');
        setTimeout(() => res.socket?.destroy(), 20);
      } else if (content.startsWith('long')) {
        const body = `${dup.slice(0, -1)},"pad":"${'x'.repeat(LONG)}"}`;
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length });
        res.end(body);
      } else if (content.startsWith('chunked')) {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.write(dup.slice(0, 10));
        res.end(dup.slice(10));
      } else {
        const body = content.startsWith('dup') ? dup : '{"accepted":true}';
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length });
        res.end(body);
      }
    });
  });
}

describe('relay answers to HTTP events, cut, long or unsized', { timeout: 60_000 }, () => {
  let relay: http.Server;
  let gw: GatewayUnderTest;

  before(async () => {
    relay = answeringRelay();
    await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(relay.address() as AddressInfo).port}`;
    gw = await startGateway('iovalkey', 'standalone', [{ id: 'relay-a', url }], {
      identity: { order: ['pubkey', 'ip'] },
      healthCheck: { intervalMs: 500, path: '/' },
      quotas: {
        keyPrefix: `answers${Date.now().toString(36)}`,
        tiers: { default: { write: { points: 50, windowSec: 60 } } },
      },
    });
  });

  after(async () => {
    await gw?.proc.stop();
    relay?.close();
  });

  const post = (event: Event, from: string) =>
    request(`${gw.url}/events`, { method: 'POST', body: JSON.stringify(event), from });

  it('gives the author back only what a whole short answer says it had', async () => {
    const sk = generateSecretKey();
    const paid = () => writesConsumed(gw, `pk:${getPublicKey(sk)}`);
    const stored = await post(signedEvent(1, 'new', sk), '127.0.40.2');
    assert.equal(stored.status, 200, stored.body);
    assert.equal(await paid(), 1);
    const dup = await post(signedEvent(1, 'dup a', sk), '127.0.40.2');
    assert.match(dup.body, /duplicate:/);
    // A duplicate: answer gives the charge back (after the answer: waited for).
    await waitFor('the refund', async () => (await paid()) === 1);

    const long = await post(signedEvent(1, 'long', sk), '127.0.40.2');
    assert.equal(long.status, 200);
    assert.ok(long.body.length > LONG, 'the long answer reaches the client whole');
    const chunked = await post(signedEvent(1, 'chunked', sk), '127.0.40.2');
    assert.match(chunked.body, /^\{"accepted":true,"message":"duplicate:/);
    // Answers not read whole are taken as stored: two more charges, none given back. A
    // duplicate after them is given back, and the count settles there.
    assert.match((await post(signedEvent(1, 'dup b', sk), '127.0.40.2')).body, /duplicate:/);
    await waitFor('the author to have paid for 3', async () => (await paid()) === 3);
  });

  it('answers a cut answer 502, keeps the charge (the relay may have stored it), serves others', async () => {
    const sk = generateSecretKey();
    const cut = await post(signedEvent(1, 'cut', sk), '127.0.40.3');
    assert.equal(cut.status, 502, cut.body);
    assert.equal(await writesConsumed(gw, `pk:${getPublicKey(sk)}`), 1);
    // A cut answer is the relay's failure (it may leave rotation until its health check
    // passes again): the next client is served once it is back, and never refused 429.
    await waitFor('another client served', async () => {
      const other = await post(signedEvent(1, 'someone else'), '127.0.40.4');
      assert.notEqual(other.status, 429, other.body);
      return other.status === 200;
    });
  });
});
