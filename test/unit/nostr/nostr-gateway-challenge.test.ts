/**
 * nostr.auth.challenge gateway, in process: the real admission step and session with a
 * scripted decider. The gateway issues the challenge, answers AUTH itself and forwards none,
 * withholds the relay's challenge, and checks the AUTH event as it does under the relay's.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { makeAuthEvent } from 'nostr-tools/nip42';
import { finalizeEvent, generateSecretKey, getPublicKey } from 'nostr-tools/pure';
import type { Event } from 'nostr-tools/pure';
import type { ConnectionFacts } from '../../../src/gateway/admission.js';
import { verifySignature } from '../../../src/nostr/frames.js';
import { MAX_AUTH_ATTEMPTS, NostrSession } from '../../../src/nostr/session.js';
import { admissionUnderTest } from '../../helpers/fake-admission-context.js';
import { signedEvent } from '../../helpers/nostr-events.js';

const PUBLIC_URL = 'wss://relay.example.test';

function setUp(nostr: Record<string, unknown> = {}) {
  const under = admissionUnderTest(
    {
      identity: { order: ['auth', 'ip'] },
      nostr: { publicUrl: PUBLIC_URL, auth: { challenge: 'gateway' }, ...nostr },
      limits: { framesPerSecPerAddress: 1_000_000 },
    },
    [],
  );
  const conn = (): ConnectionFacts => ({
    ip: '203.0.113.20',
    nodeId: 'relay-a',
    session: under.admission.newSession(),
  });
  const frame = (c: ConnectionFacts, msg: unknown[]) =>
    under.admission.frame(c, Buffer.from(JSON.stringify(msg)), false);
  return { under, conn, frame };
}

/** The challenge a session greets its client with. */
function challengeOf(c: ConnectionFacts): string {
  const greeting = c.session.greeting();
  assert.equal(greeting.length, 1);
  assert.equal(greeting[0]![0], 'AUTH');
  return String(greeting[0]![1]);
}

function authEvent(challenge: string, sk = generateSecretKey(), relay = PUBLIC_URL): Event {
  return finalizeEvent(makeAuthEvent(relay, challenge), sk);
}

describe("nostr.auth.challenge gateway (the gateway's own challenge)", { timeout: 30_000 }, () => {
  it('greets each connection with a fresh random challenge; the relay mode greets with none', () => {
    const { conn } = setUp();
    const a = challengeOf(conn());
    const b = challengeOf(conn());
    assert.match(a, /^[0-9a-f]{32}$/);
    assert.notEqual(a, b);
    const relayMode = setUp({ auth: { challenge: 'relay' } });
    assert.deepEqual(relayMode.conn().session.greeting(), []);
  });

  it('answers a good AUTH itself with OK true, binds it, and forwards nothing', async () => {
    const { conn, frame, under } = setUp();
    const c = conn();
    const sk = generateSecretKey();
    const auth = authEvent(challengeOf(c), sk);
    const verdict = await frame(c, ['AUTH', auth]);
    assert.equal(verdict.forward, false);
    assert.deepEqual(verdict.reply, ['OK', auth.id, true, '']);
    assert.equal(c.session.authPubkey, getPublicKey(sk));
    // The write after it is charged to the key, besides the address.
    const write = signedEvent(1, 'after AUTH');
    assert.equal((await frame(c, ['EVENT', write])).forward, true);
    const charged = under.decider.charges.map((x) => `${x.source}:${x.raw}`);
    assert.deepEqual(charged, ['ip:203.0.113.20', `auth:${getPublicKey(sk)}`]);
  });

  it('refuses the checks the relay would make: challenge, relay tag, kind, signature', async () => {
    const { conn, frame } = setUp();
    const c = conn();
    const other = conn();
    const challenge = challengeOf(c);
    const sk = generateSecretKey();
    const cases: [Event, RegExp][] = [
      [authEvent(challengeOf(other), sk), /^invalid: the challenge tag/],
      [authEvent(challenge, sk, 'wss://elsewhere.example'), /^invalid: the relay tag/],
      [{ ...authEvent(challenge, sk), kind: 1 }, /^invalid: an AUTH event has kind 22242/],
      [
        { ...authEvent(challenge, sk), sig: authEvent(challenge).sig },
        /^invalid: event id or signature does not verify/,
      ],
    ];
    for (const [event, reason] of cases) {
      const verdict = await frame(c, ['AUTH', event]);
      assert.equal(verdict.forward, false);
      assert.equal(verdict.reply![2], false);
      assert.match(String(verdict.reply![3]), reason);
    }
    assert.equal(c.session.authPubkey, undefined);
  });

  it("withholds the relay's challenge and never answers AUTH by it", async () => {
    const { conn, frame } = setUp();
    const c = conn();
    const ours = challengeOf(c);
    const actions = c.session.relay(Buffer.from(JSON.stringify(['AUTH', 'the-relays-own'])));
    assert.deepEqual(actions, [{ type: 'withhold' }]);
    const byRelays = authEvent('the-relays-own');
    const verdict = await frame(c, ['AUTH', byRelays]);
    assert.equal(verdict.forward, false);
    assert.match(String(verdict.reply![3]), /^invalid: the challenge tag/);
    assert.equal((await frame(c, ['AUTH', authEvent(ours)])).reply![2], true, 'ours still binds');
    // The relay's OK for an id never forwarded changes nothing.
    const bound = c.session.authPubkey;
    c.session.relay(Buffer.from(JSON.stringify(['OK', byRelays.id, false, 'restricted: no'])));
    assert.equal(c.session.authPubkey, bound);
  });

  it('refuses a second pubkey, and AUTH past the attempts bound', async () => {
    const { conn, frame } = setUp();
    const c = conn();
    const challenge = challengeOf(c);
    const sk = generateSecretKey();
    assert.equal((await frame(c, ['AUTH', authEvent(challenge, sk)])).reply![2], true);
    const second = await frame(c, ['AUTH', authEvent(challenge)]);
    assert.match(String(second.reply![3]), /^restricted: this connection is authenticated as/);
    for (let i = 1; i < MAX_AUTH_ATTEMPTS; i++) {
      const again = await frame(c, ['AUTH', authEvent(challenge, sk)]);
      assert.equal(again.reply![2], true, `attempt ${i + 1}`);
    }
    const past = await frame(c, ['AUTH', authEvent(challenge, sk)]);
    assert.equal(past.forward, false);
    assert.match(String(past.reply![3]), /^restricted: at most 8 AUTH attempts/);
  });

  it('answers auth-required: before AUTH under authRequiredForWrites', async () => {
    const { conn, frame, under } = setUp({ authRequiredForWrites: true });
    const c = conn();
    const early = signedEvent(1, 'too early');
    const refused = await frame(c, ['EVENT', early]);
    assert.equal(refused.forward, false);
    assert.match(String(refused.reply![3]), /^auth-required: /);
    assert.equal(under.decider.charges.length, 0, 'nothing charged');
    await frame(c, ['AUTH', authEvent(challengeOf(c))]);
    assert.equal((await frame(c, ['EVENT', signedEvent(1, 'after AUTH')])).forward, true);
  });

  it('needs publicUrl, in the configuration and in the session', () => {
    assert.throws(() => setUp({ publicUrl: undefined }).conn(), /is required by NIP-42 AUTH/);
    const settings = setUp({ auth: { challenge: 'relay' } }).under.admission.sessionSettings();
    assert.throws(
      () => new NostrSession({ ...settings, publicUrl: undefined }, verifySignature, 'c'),
      /needs publicUrl/,
    );
  });
});
