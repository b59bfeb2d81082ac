/**
 * Subscription caps per connection (nostr.maxSubscriptions, nostr.maxFiltersPerReq) through
 * the gateway to the reference relay, and a REQ's many stored events passed on whole.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { finalizeEvent, generateSecretKey } from 'nostr-tools/pure';
import { NostrClient } from '../helpers/gateway.js';
import { nostrSuite } from '../helpers/nostr-suite.js';
import { RawNostr, textFrame } from '../helpers/raw-nostr.js';

const MAX_SUBS = 2;
const MAX_FILTERS = 2;

/** Send a REQ and wait for what ends its first answer: EOSE or CLOSED for that id. */
async function req(client: NostrClient, subId: string, ...filters: unknown[]): Promise<unknown[]> {
  const from = client.received.length;
  const ends = (m: unknown[]) => (m[0] === 'EOSE' || m[0] === 'CLOSED') && m[1] === subId;
  client.send(['REQ', subId, ...filters]);
  await client.until((msgs) => msgs.slice(from).some(ends));
  return client.received.slice(from).find(ends)!;
}

describe('subscription caps', { timeout: 90_000 }, () => {
  const suite = nostrSuite({
    client: 'ioredis',
    mode: 'standalone',
    limit: 100,
    settings: { nostr: { maxSubscriptions: MAX_SUBS, maxFiltersPerReq: MAX_FILTERS } },
  });

  it('refuses a REQ beyond the cap with CLOSED restricted:, unforwarded; CLOSE frees one', async () => {
    const client = await suite.connect('127.0.15.2');
    assert.equal((await req(client, 'a', { kinds: [1] }))[0], 'EOSE');
    assert.equal((await req(client, 'b', { kinds: [1] }))[0], 'EOSE');
    const refused = await req(client, 'c', { kinds: [1] });
    assert.equal(refused[0], 'CLOSED');
    assert.match(String(refused[2]), /^restricted: at most 2 open subscriptions per connection/);
    client.send(['CLOSE', 'a']);
    assert.equal((await req(client, 'd', { kinds: [1] }))[0], 'EOSE', 'CLOSE freed one');
    // Had the refused REQ reached the relay, its EOSE would have come before d's.
    assert.ok(!client.received.some((m) => m[0] === 'EOSE' && m[1] === 'c'), 'c never forwarded');
    assert.equal((await req(client, 'e', { kinds: [1] }))[0], 'CLOSED', 'b and d are open');
  });

  it('counts a REQ reusing an open id once, and each connection on its own', async () => {
    const client = await suite.connect('127.0.15.3');
    assert.equal((await req(client, 'a', { kinds: [1] }))[0], 'EOSE');
    assert.equal((await req(client, 'b', { kinds: [1] }))[0], 'EOSE');
    assert.equal((await req(client, 'a', { kinds: [7] }))[0], 'EOSE', 'replaces a');
    assert.equal((await req(client, 'b', { kinds: [7] }))[0], 'EOSE', 'replaces b');
    const other = await suite.connect('127.0.15.3');
    assert.equal((await req(other, 'a', { kinds: [1] }))[0], 'EOSE', 'another connection');
  });

  it('frees a subscription the relay closes itself', async () => {
    const client = await suite.connect('127.0.15.4');
    assert.equal((await req(client, 'a', { kinds: [1] }))[0], 'EOSE');
    const byRelay = await req(client, 'bad', 'not a filter');
    assert.equal(byRelay[0], 'CLOSED');
    assert.match(String(byRelay[2]), /^invalid: /, 'the relay refused it, not the gateway');
    assert.equal((await req(client, 'b', { kinds: [1] }))[0], 'EOSE', 'bad no longer counts');
  });

  it('refuses more filters than allowed in one REQ or COUNT', async () => {
    const client = await suite.connect('127.0.15.5');
    const refused = await req(client, 'many', { kinds: [1] }, { kinds: [7] }, { kinds: [0] });
    assert.equal(refused[0], 'CLOSED');
    assert.equal(refused[2], `restricted: at most ${MAX_FILTERS} filters per REQ`);
    client.send(['COUNT', 'count', { kinds: [1] }, { kinds: [7] }, { kinds: [0] }]);
    await client.until((m) => m.some((x) => x[0] === 'CLOSED' && x[1] === 'count'));
    const two = await req(client, 'two', { kinds: [1] }, { kinds: [7] });
    assert.equal(two[0], 'EOSE');
  });

  it("passes a REQ's stored events on whole and in the relay's order", async () => {
    // 300 events of about 1 KiB: the answer spans many reads of the relay socket, each
    // passed on in one write (turn-writes.ts), and more than one write to the client.
    const sk = generateSecretKey();
    const direct = await NostrClient.connect(suite.relay().url);
    const now = Math.floor(Date.now() / 1000);
    const sent = Array.from({ length: 300 }, (_, i) =>
      finalizeEvent(
        { kind: 1, created_at: now - i, tags: [], content: `${i} ${'x'.repeat(1000)}` },
        sk,
      ),
    );
    for (const event of sent) direct.send(['EVENT', event]);
    await direct.until((m) => m.filter((x) => x[0] === 'OK' && x[2] === true).length === 300);
    const filter = { authors: [sent[0]!.pubkey], limit: 300 };
    const idsOf = (msgs: unknown[]) =>
      msgs
        .filter((m) => (m as unknown[])[0] === 'EVENT')
        .map((m) => ((m as unknown[])[2] as { id: string }).id);
    const fromRelay = idsOf(await req(direct, 'all', filter).then(() => direct.received));
    direct.close();
    assert.equal(fromRelay.length, 300, 'the relay holds them all');
    const client = await suite.connect('127.0.15.6');
    const from = client.received.length;
    await req(client, 'all', filter);
    const through = client.received.slice(from);
    assert.deepEqual(idsOf(through), fromRelay, 'every event, once, in the same order');
    assert.deepEqual(through.at(-1), ['EOSE', 'all'], 'and EOSE after them');
  });
});

describe("a client's frames read together", { timeout: 60_000 }, () => {
  const suite = nostrSuite({ client: 'iovalkey', mode: 'standalone', limit: 100, settings: {} });

  it('reach the relay whole: 20 REQs in one TCP write, each answered', async () => {
    // The gateway holds what it forwards to the relay for one read and sends it in one write;
    // nothing may be lost or left held.
    const raw = await RawNostr.open(suite.gw().url, '127.0.15.7');
    try {
      const subs = Array.from({ length: 20 }, (_, i) => `s${i}`);
      raw.socket.write(Buffer.concat(subs.map((s) => textFrame(['REQ', s, { kinds: [1] }]))));
      await raw.until('20 EOSEs', (msgs) => msgs.filter((m) => m[0] === 'EOSE').length === 20);
      assert.deepEqual(
        raw.received
          .filter((m) => m[0] === 'EOSE')
          .map((m) => m[1] as string)
          .sort(),
        [...subs].sort(),
      );
      assert.deepEqual(
        raw.received.filter((m) => m[0] !== 'EOSE'),
        [],
      );
    } finally {
      raw.close();
    }
  });
});
