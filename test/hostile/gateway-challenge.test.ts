/**
 * Attacks on the gateway's own NIP-42 challenge (nostr.auth.challenge gateway), over raw
 * sockets against a real gateway before the reference relay (with NIP-42 on, so it has
 * challenges of its own): AUTH over another connection's challenge, over a challenge the
 * relay issued, and a flood of AUTH frames, each refused for that client while another
 * client authenticates and writes.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { makeAuthEvent } from 'nostr-tools/nip42';
import { finalizeEvent, generateSecretKey, getPublicKey } from 'nostr-tools/pure';
import type { Event } from 'nostr-tools/pure';
import { NostrClient, writesConsumed } from '../helpers/gateway.js';
import { signedEvent } from '../helpers/nostr-events.js';
import { nostrSuite } from '../helpers/nostr-suite.js';
import { RawNostr } from '../helpers/raw-nostr.js';

const PUBLIC_URL = 'wss://relay.example.test';
const MAX_INVALID = 4;

/**
 * AUTH events of one key over one challenge differ by `createdAt` alone (their ids): callers
 * give each its own, from one clock reading (a second ticking between two reads would give
 * two events the same id, and one answer would stand for both).
 */
function authEvent(challenge: string, sk = generateSecretKey(), createdAt?: number): Event {
  const template = makeAuthEvent(PUBLIC_URL, challenge);
  if (createdAt !== undefined) template.created_at = createdAt;
  return finalizeEvent(template, sk);
}

async function challengeOf(client: RawNostr): Promise<string> {
  await client.until('an AUTH challenge', (m) => m.some((x) => x[0] === 'AUTH'));
  return String(client.received.find((x) => x[0] === 'AUTH')![1]);
}

describe("attacks on the gateway's own AUTH challenge", { timeout: 90_000 }, () => {
  const suite = nostrSuite({
    client: 'iovalkey',
    mode: 'standalone',
    limit: 100,
    relayArgs: ['--public-url', `${PUBLIC_URL}/`],
    settings: {
      identity: { order: ['auth', 'ip'] },
      nostr: {
        publicUrl: PUBLIC_URL,
        auth: { challenge: 'gateway' },
        authRequiredForWrites: true,
        maxInvalidEvents: MAX_INVALID,
      },
    },
  });
  const clients: RawNostr[] = [];
  after(() => clients.forEach((c) => c.close()));

  async function open(from: string): Promise<RawNostr> {
    const client = await RawNostr.open(suite.gw().url, from);
    clients.push(client);
    return client;
  }

  /** An honest client on its own address: authenticates and writes, charged to its key. */
  async function honestClientIsServed(from: string): Promise<void> {
    const client = await open(from);
    const sk = generateSecretKey();
    const auth = authEvent(await challengeOf(client), sk);
    client.send(['AUTH', auth]);
    assert.deepEqual((await client.okFor(auth.id)).slice(2), [true, '']);
    const write = signedEvent(1, `from ${from}`);
    client.send(['EVENT', write]);
    assert.equal((await client.okFor(write.id))[2], true);
    assert.equal(await writesConsumed(suite.gw(), `auth:${getPublicKey(sk)}`), 1);
  }

  /** The attacker is still unauthenticated: its write is refused auth-required:, uncharged. */
  async function stillRefused(client: RawNostr, from: string): Promise<void> {
    const write = signedEvent(1, 'attacker write');
    client.send(['EVENT', write]);
    assert.match(String((await client.okFor(write.id))[3]), /^auth-required: /);
    assert.equal(await writesConsumed(suite.gw(), `ip:${from}`), 0);
  }

  it("refuses AUTH over another connection's challenge (replayed)", async () => {
    const victim = await open('127.0.22.2');
    const attacker = await open('127.0.22.3');
    // The victim's own signed AUTH, replayed as is, and the attacker's key over its challenge.
    const victims = authEvent(await challengeOf(victim));
    victim.send(['AUTH', victims]);
    assert.equal((await victim.okFor(victims.id))[2], true);
    for (const event of [victims, authEvent(await challengeOf(victim))]) {
      attacker.send(['AUTH', event]);
      const ok = await attacker.okFor(event.id);
      assert.equal(ok[2], false);
      assert.match(String(ok[3]), /^invalid: the challenge tag/);
    }
    await stillRefused(attacker, '127.0.22.3');
    await honestClientIsServed('127.0.22.4');
  });

  it("refuses AUTH over a challenge the relay issued, and never shows the relay's", async () => {
    const direct = await NostrClient.connect(suite.relay().url);
    await direct.until((m) => m.some((x) => x[0] === 'AUTH'));
    const relays = String(direct.received.find((x) => x[0] === 'AUTH')![1]);
    direct.close();
    const attacker = await open('127.0.22.5');
    const ours = await challengeOf(attacker);
    const event = authEvent(relays);
    attacker.send(['AUTH', event]);
    const ok = await attacker.okFor(event.id);
    assert.equal(ok[2], false);
    assert.match(String(ok[3]), /^invalid: the challenge tag/);
    const challenges = attacker.received.filter((m) => m[0] === 'AUTH');
    assert.deepEqual(challenges, [['AUTH', ours]], "the relay's challenge is withheld");
    await stillRefused(attacker, '127.0.22.5');
    await honestClientIsServed('127.0.22.6');
  });

  it('a flood of AUTH frames: bounded attempts, then closed for bad signatures', async () => {
    const attacker = await open('127.0.22.7');
    const challenge = await challengeOf(attacker);
    const sk = generateSecretKey();
    // Good ones, each verified: at most 8 per connection, then refused before verifying.
    const nowSec = Math.floor(Date.now() / 1000);
    const good = Array.from({ length: 12 }, (_, i) => authEvent(challenge, sk, nowSec - i));
    assert.equal(new Set(good.map((e) => e.id)).size, good.length, 'twelve distinct AUTH events');
    for (const event of good) attacker.send(['AUTH', event]);
    const answers = await Promise.all(good.map((e) => attacker.okFor(e.id)));
    assert.equal(answers.filter((a) => a[2] === true).length, 8);
    for (const a of answers.slice(8)) assert.match(String(a[3]), /^restricted: at most 8 AUTH/);

    // Bad signatures on a fresh connection: each counts as an invalid event, then it closes.
    const flooder = await open('127.0.22.8');
    const fresh = await challengeOf(flooder);
    const wrongSig = authEvent(fresh).sig;
    for (let i = 0; i < 50; i++) {
      flooder.send(['AUTH', { ...authEvent(fresh, sk), sig: wrongSig }]);
    }
    await flooder.until('the close notice', (m) =>
      m.some((x) => x[0] === 'NOTICE' && /too many events that do not verify/.test(String(x[1]))),
    );
    // Closed at the bound: what it sent after is never read (the rest of its queue dropped).
    const refused = flooder.received.filter((m) => m[0] === 'OK');
    assert.equal(refused.length, MAX_INVALID, 'answered until the bound, then closed');
    for (const ok of refused) assert.match(String(ok[3]), /^invalid: event id or signature/);
    assert.equal(await writesConsumed(suite.gw(), `ip:127.0.22.8`), 0);
    await honestClientIsServed('127.0.22.9');
  });
});
