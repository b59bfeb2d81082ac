/**
 * NIP-42 AUTH through the gateway to the reference relay (started with --public-url): the
 * relay's challenge reaches the client, the client's AUTH event the relay, and the relay's OK
 * the client; the gateway binds the pubkey only after its own checks, and the `auth` identity
 * charges it for the connection's writes.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { makeAuthEvent } from 'nostr-tools/nip42';
import { finalizeEvent, generateSecretKey, getPublicKey } from 'nostr-tools/pure';
import type { Event } from 'nostr-tools/pure';
import { NostrClient, writesConsumed } from '../helpers/gateway.js';
import { relayHas, signedEvent } from '../helpers/nostr-events.js';
import { nostrSuite } from '../helpers/nostr-suite.js';
import { rawRequest } from '../helpers/raw-http.js';

const PUBLIC_URL = 'wss://relay.example.test';

/** The challenge the client was sent (the relay's, through the gateway). */
async function challengeOf(client: NostrClient): Promise<string> {
  await client.until((m) => m.some((x) => x[0] === 'AUTH'));
  return String(client.received.find((x) => x[0] === 'AUTH')![1]);
}

function authEvent(
  challenge: string,
  sk: Uint8Array,
  change: { relay?: string; created_at?: number } = {},
): Event {
  const template = makeAuthEvent(change.relay ?? PUBLIC_URL, challenge);
  if (change.created_at !== undefined) template.created_at = change.created_at;
  return finalizeEvent(template, sk);
}

async function authenticate(client: NostrClient, sk: Uint8Array): Promise<unknown[]> {
  const auth = authEvent(await challengeOf(client), sk);
  return client.okFor(auth.id, ['AUTH', auth]);
}

const relayArgs = ['--public-url', `${PUBLIC_URL}/`];

describe('NIP-42 AUTH through the gateway', { timeout: 90_000 }, () => {
  const suite = nostrSuite({
    client: 'iovalkey',
    mode: 'standalone',
    limit: 100,
    relayArgs,
    settings: { identity: { order: ['auth', 'ip'] }, nostr: { publicUrl: PUBLIC_URL } },
  });

  it('binds the pubkey it checked, and charges it besides the address for the writes', async () => {
    const client = await suite.connect('127.0.16.2');
    const before = signedEvent(1, 'before AUTH');
    assert.equal((await client.okFor(before.id, ['EVENT', before]))[2], true);
    assert.equal(await writesConsumed(suite.gw(), 'ip:127.0.16.2'), 1, 'before: the address');

    const sk = generateSecretKey();
    const ok = await authenticate(client, sk);
    assert.deepEqual(ok.slice(2), [true, ''], 'the relay OK reached the client');
    const after = signedEvent(1, 'after AUTH');
    assert.equal((await client.okFor(after.id, ['EVENT', after]))[2], true);
    assert.equal(await writesConsumed(suite.gw(), `auth:${getPublicKey(sk)}`), 1);
    // A key costs nothing to mint: it adds a charge, and the address pays as before.
    assert.equal(await writesConsumed(suite.gw(), 'ip:127.0.16.2'), 2, 'the address paid too');
  });

  it('binds nothing on a second connection replaying that AUTH event', async () => {
    const first = await suite.connect('127.0.16.3');
    const sk = generateSecretKey();
    const auth = authEvent(await challengeOf(first), sk);
    assert.equal((await first.okFor(auth.id, ['AUTH', auth]))[2], true);

    const replayer = await suite.connect('127.0.16.4');
    assert.notEqual(await challengeOf(replayer), await challengeOf(first));
    const replayed = await replayer.okFor(auth.id, ['AUTH', auth]);
    assert.equal(replayed[2], false);
    assert.equal(replayed[3], 'invalid: the challenge tag is not the challenge of this connection');
    const write = signedEvent(1, 'from the replayer');
    assert.equal((await replayer.okFor(write.id, ['EVENT', write]))[2], true);
    assert.equal(await writesConsumed(suite.gw(), 'ip:127.0.16.4'), 1, 'charged to its address');
    assert.equal(await writesConsumed(suite.gw(), `auth:${getPublicKey(sk)}`), 0);
  });

  it('refuses AUTH events it cannot bind, without forwarding them', async () => {
    const client = await suite.connect('127.0.16.5');
    const challenge = await challengeOf(client);
    const sk = generateSecretKey();
    const cases: [Event, RegExp][] = [
      [authEvent(challenge, sk, { relay: 'wss://elsewhere.example' }), /^invalid: the relay tag/],
      [
        authEvent(challenge, sk, { created_at: Math.floor(Date.now() / 1000) - 3600 }),
        /^invalid: created_at is more than 10 minutes/,
      ],
      [{ ...authEvent(challenge, sk), kind: 1 }, /^invalid: an AUTH event has kind 22242/],
      [
        { ...authEvent(challenge, sk), sig: authEvent(challenge, generateSecretKey()).sig },
        /^invalid: event id or signature does not verify/,
      ],
    ];
    for (const [event, reason] of cases) {
      const ok = await client.okFor(event.id, ['AUTH', event]);
      assert.equal(ok[2], false);
      assert.match(String(ok[3]), reason);
    }
    // Not an event at all, as a hostile client would send it.
    client.send('["AUTH","not an event"]');
    await client.until((m) => m.some((x) => x[0] === 'OK' && x[1] === '' && x[2] === false));
    const write = signedEvent(1, 'still unauthenticated');
    assert.equal((await client.okFor(write.id, ['EVENT', write]))[2], true);
    assert.equal(await writesConsumed(suite.gw(), `auth:${getPublicKey(sk)}`), 0);
  });

  it('the reference relay checks AUTH itself (challenge on connect, OK per event)', async () => {
    const direct = await NostrClient.connect(suite.relay().url);
    try {
      const sk = generateSecretKey();
      const good = authEvent(await challengeOf(direct), sk);
      assert.deepEqual((await direct.okFor(good.id, ['AUTH', good])).slice(2), [true, '']);
      const wrong = authEvent('another challenge', sk);
      const refused = await direct.okFor(wrong.id, ['AUTH', wrong]);
      assert.equal(refused[2], false);
      assert.match(String(refused[3]), /^invalid: the challenge tag/);
    } finally {
      direct.close();
    }
  });
});

describe('auth-required writes', { timeout: 90_000 }, () => {
  const suite = nostrSuite({
    client: 'valkey-glide',
    mode: 'cluster',
    limit: 100,
    relayArgs,
    settings: {
      identity: { order: ['auth', 'ip'] },
      nostr: { publicUrl: PUBLIC_URL, authRequiredForWrites: true },
    },
  });

  it('answers auth-required: before AUTH, forwarding nothing; accepts after', async () => {
    const client = await suite.connect('127.0.16.6');
    const early = signedEvent(1, 'too early');
    const refused = await client.okFor(early.id, ['EVENT', early]);
    assert.equal(refused[2], false);
    assert.match(String(refused[3]), /^auth-required: /);
    assert.equal(await relayHas(suite.relay().url, early.id), false);
    assert.equal(await writesConsumed(suite.gw(), 'ip:127.0.16.6'), 0, 'nothing charged');

    const sk = generateSecretKey();
    assert.equal((await authenticate(client, sk))[2], true);
    const late = signedEvent(1, 'after AUTH');
    assert.equal((await client.okFor(late.id, ['EVENT', late]))[2], true);
    assert.equal(await writesConsumed(suite.gw(), `auth:${getPublicKey(sk)}`), 1);
  });

  it('refuses an event POSTed over HTTP, which cannot authenticate: 403, nothing stored or charged', async () => {
    const event = signedEvent(1, 'posted around AUTH');
    const body = JSON.stringify(event);
    const res = await rawRequest(
      suite.gw().url,
      `POST /events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
      '127.0.16.7',
    );
    assert.equal(res.status, 403);
    assert.match(res.body, /auth-required: /);
    assert.equal(await relayHas(suite.relay().url, event.id), false);
    assert.equal(await writesConsumed(suite.gw(), 'ip:127.0.16.7'), 0, 'nothing charged');
  });
});

describe("the gateway's own challenge, before a relay without NIP-42", { timeout: 90_000 }, () => {
  // The reference relay without --public-url sends no challenge and answers AUTH with NOTICE.
  const suite = nostrSuite({
    client: 'iovalkey',
    mode: 'standalone',
    limit: 100,
    settings: {
      identity: { order: ['auth', 'ip'] },
      nostr: { publicUrl: PUBLIC_URL, auth: { challenge: 'gateway' }, authRequiredForWrites: true },
    },
  });

  /** A REQ answered EOSE: the relay answered everything the client sent before it. */
  async function relayCaughtUp(client: NostrClient, subId: string): Promise<void> {
    client.send(['REQ', subId, { ids: ['0'.repeat(64)] }]);
    await client.until((m) => m.some((x) => x[0] === 'EOSE' && x[1] === subId));
  }

  it('the client AUTHs with the gateway; the key is charged; the relay never sees AUTH', async () => {
    const client = await suite.connect('127.0.16.7');
    const challenge = await challengeOf(client);
    assert.match(challenge, /^[0-9a-f]{32}$/);
    const early = signedEvent(1, 'before AUTH');
    assert.match(String((await client.okFor(early.id, ['EVENT', early]))[3]), /^auth-required: /);

    const sk = generateSecretKey();
    const ok = await authenticate(client, sk);
    assert.deepEqual(ok.slice(2), [true, ''], "the gateway's OK");
    const write = signedEvent(1, 'after AUTH');
    assert.equal((await client.okFor(write.id, ['EVENT', write]))[2], true);
    assert.equal(await relayHas(suite.relay().url, write.id), true);
    assert.equal(await writesConsumed(suite.gw(), `auth:${getPublicKey(sk)}`), 1);
    assert.equal(await writesConsumed(suite.gw(), 'ip:127.0.16.7'), 1, 'the address paid too');
    // The relay answers in order: had the AUTH reached it, its NOTICE would precede this EOSE.
    await relayCaughtUp(client, 'after-auth');
    assert.deepEqual(
      client.received.filter((m) => m[0] === 'NOTICE' || m[0] === 'AUTH').map((m) => m[0]),
      ['AUTH'],
      `one challenge and no NOTICE: ${JSON.stringify(client.received)}`,
    );
  });

  it("refuses an AUTH event over another connection's challenge", async () => {
    const first = await suite.connect('127.0.16.8');
    const second = await suite.connect('127.0.16.9');
    const sk = generateSecretKey();
    const replayed = authEvent(await challengeOf(first), sk);
    assert.notEqual(await challengeOf(second), await challengeOf(first));
    const refused = await second.okFor(replayed.id, ['AUTH', replayed]);
    assert.equal(refused[2], false);
    assert.match(String(refused[3]), /^invalid: the challenge tag/);
    const write = signedEvent(1, 'still unauthenticated');
    assert.match(String((await second.okFor(write.id, ['EVENT', write]))[3]), /^auth-required: /);
  });

  it('the relay itself answers AUTH with a NOTICE (what the gateway spares the client)', async () => {
    const direct = await NostrClient.connect(suite.relay().url);
    try {
      direct.send(['AUTH', authEvent('any', generateSecretKey())]);
      await direct.until((m) => m.some((x) => x[0] === 'NOTICE'));
      assert.equal(direct.received.filter((m) => m[0] === 'AUTH').length, 0, 'no challenge');
    } finally {
      direct.close();
    }
  });
});
