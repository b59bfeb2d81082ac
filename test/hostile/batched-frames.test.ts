/**
 * Frames a client sends in one TCP write, which the gateway forwards to the relay in one write
 * (the relay socket held for that read): over a raw socket against a real gateway and relay,
 * with forgeries, replays and a half-sent frame among them, and the socket cut at once. Each
 * author pays for its own event once, a victim named by a forgery pays nothing, no relay
 * socket outlives its client, and another client is served as before.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { generateSecretKey, getPublicKey } from 'nostr-tools/pure';
import { encodeWsFrame } from '../helpers/fuzz-socket.js';
import { writesConsumed, writesConsumedReach } from '../helpers/gateway.js';
import { inNameOf, relayHas, signedEvent } from '../helpers/nostr-events.js';
import { nostrSuite } from '../helpers/nostr-suite.js';
import { RawNostr, textFrame } from '../helpers/raw-nostr.js';
import { relayConnections, waitFor } from '../helpers/raw-socket.js';

describe('frames read together', { timeout: 90_000 }, () => {
  const suite = nostrSuite({ client: 'iovalkey', mode: 'standalone', limit: 10, settings: {} });
  const clients: RawNostr[] = [];
  after(() => clients.forEach((c) => c.close()));

  it('cut at once after one write: its events charged to their authors only, no relay socket left', async () => {
    const relayUrl = suite.relay().url;
    const before = await relayConnections(relayUrl);
    const authorKey = generateSecretKey();
    const author = getPublicKey(authorKey);
    const victim = getPublicKey(generateSecretKey());
    const own = signedEvent(1, 'batched and cut', authorKey);
    const forged = inNameOf(victim, 'not the victim', '00'.repeat(64));
    const subs = Array.from({ length: 30 }, (_, i) => `b${i}`);
    const raw = await RawNostr.open(suite.gw().url, '127.0.16.2');
    clients.push(raw);
    raw.socket.end(
      Buffer.concat([
        textFrame(['EVENT', own]),
        textFrame(['EVENT', forged]),
        ...subs.flatMap((s) => [textFrame(['REQ', s, { kinds: [1] }]), textFrame(['CLOSE', s])]),
        // Half a frame: its header says 100 bytes, 10 follow, then the FIN.
        encodeWsFrame({
          fin: true,
          rsv: 0,
          opcode: 1,
          payload: Buffer.alloc(100, 0x20),
          masked: true,
        }).subarray(0, 16),
      ]),
    );
    // The author's event was forwarded before the client left, and the relay kept it.
    await waitFor('the relay to store the batched event', () => relayHas(relayUrl, own.id));
    assert.equal(await writesConsumedReach(suite.gw(), `pk:${author}`, 1), 1);
    // The forgery in the victim's name: answered invalid by the relay, the point given back.
    assert.equal(await writesConsumedReach(suite.gw(), `pk:${victim}`, 0), 0);
    assert.equal(await relayHas(relayUrl, forged.id), false);
    await waitFor('no relay socket left of the cut client', async () => {
      return (await relayConnections(relayUrl)) <= before;
    });
    // Someone else, served as before.
    const other = await suite.connect('127.0.16.3');
    const theirs = signedEvent(1, 'after the batch');
    other.send(['EVENT', theirs]);
    const ok = (await other.until((m) => m.some((x) => x[0] === 'OK' && x[1] === theirs.id))).find(
      (x) => x[0] === 'OK' && x[1] === theirs.id,
    )!;
    assert.equal(ok[2], true, JSON.stringify(ok));
  });

  it('a replay inside the same write is answered once as a duplicate, its author charged once', async () => {
    const key = generateSecretKey();
    const author = getPublicKey(key);
    const event = signedEvent(1, 'sent twice in one write', key);
    const raw = await RawNostr.open(suite.gw().url, '127.0.16.4');
    clients.push(raw);
    raw.socket.write(
      Buffer.concat([
        textFrame(['EVENT', event]),
        textFrame(['EVENT', event]),
        textFrame(['REQ', 'r', { ids: [event.id] }]),
      ]),
    );
    await raw.until(
      'two OKs and the EOSE',
      (m) => m.filter((x) => x[0] === 'OK').length === 2 && m.some((x) => x[0] === 'EOSE'),
    );
    const oks = raw.received.filter((x) => x[0] === 'OK' && x[1] === event.id);
    assert.equal(oks.filter((x) => x[2] === true && x[3] === '').length, 1, JSON.stringify(oks));
    assert.equal(oks.length, 2, JSON.stringify(oks));
    assert.equal(await writesConsumedReach(suite.gw(), `pk:${author}`, 1), 1);
    assert.equal(await writesConsumed(suite.gw(), `pk:${author}`), 1);
  });
});
