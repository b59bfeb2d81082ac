/**
 * NIP-42 through the gateway in front of each third-party relay with NIP-42 on: nostr-rs-relay
 * 0.8 sends a challenge and never answers the client's AUTH with OK, the khatru relay sends
 * one (on connect, as relays/khatru asks khatru to) and answers OK true; either way the
 * gateway binds the pubkey on its own checks, and the `auth` identity is charged (beside the
 * address) for the connection's writes. And in front of each relay with NIP-42 off, under
 * nostr.auth.challenge gateway: the gateway issues the challenge and answers AUTH, and the
 * relay never sees it. Each relay's tests skip, with the reason, where it is not built.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { makeAuthEvent } from 'nostr-tools/nip42';
import { finalizeEvent, generateSecretKey, getPublicKey } from 'nostr-tools/pure';
import { writesConsumed } from '../helpers/gateway.js';
import type { NostrClient } from '../helpers/gateway.js';
import { relayHas, signedEvent } from '../helpers/nostr-events.js';
import { relayBehindGateway, relaysUnderSuite } from '../helpers/third-party-relays.js';
import type { RelayUnderSuite } from '../helpers/third-party-relays.js';

const PUBLIC_URL = 'wss://relay.example.test/';

/** The relay (NIP-42 on when `auth`) behind a gateway with these nostr settings. */
function relayAndGateway(suite: RelayUnderSuite, auth: boolean, nostr: Record<string, unknown>) {
  return relayBehindGateway(
    suite,
    { identity: { order: ['auth', 'ip'] }, nostr: { publicUrl: PUBLIC_URL, ...nostr } },
    auth ? { auth: { relayUrl: PUBLIC_URL } } : {},
  );
}

/** AUTH as a fresh key over the challenge the client was sent; the key. */
async function sendAuth(client: NostrClient): Promise<{ sk: Uint8Array; id: string }> {
  await client.until((m) => m.some((x) => x[0] === 'AUTH'));
  const challenge = String(client.received.find((x) => x[0] === 'AUTH')![1]);
  const sk = generateSecretKey();
  const auth = finalizeEvent(makeAuthEvent(PUBLIC_URL, challenge), sk);
  client.send(['AUTH', auth]);
  return { sk, id: auth.id };
}

for (const suite of relaysUnderSuite()) {
  const name = suite.impl;

  describe(`AUTH in front of ${name}`, { timeout: 120_000, skip: suite.skip }, () => {
    const setup = relayAndGateway(suite, true, {});

    it('binds the pubkey of a checked AUTH, whether the relay answers it or not', async () => {
      const client = await setup.connect('127.0.21.20');
      const { sk, id } = await sendAuth(client);
      const write = signedEvent(1, `after AUTH, in front of ${name}`);
      const ok = await client.okFor(write.id, ['EVENT', write]);
      assert.equal(ok[2], true, JSON.stringify(ok));
      assert.equal(await writesConsumed(setup.gw(), `auth:${getPublicKey(sk)}`), 1, 'the key');
      assert.equal(await writesConsumed(setup.gw(), 'ip:127.0.21.20'), 1, 'and the address');
      if (suite.impl === 'khatru') {
        // khatru answers AUTH (OK true, its relay tag checked against --service-url): the
        // answer reaches the client as the relay sent it.
        const answer = await client.until((m) => m.some((x) => x[0] === 'OK' && x[1] === id));
        assert.deepEqual(
          answer.find((x) => x[0] === 'OK' && x[1] === id),
          ['OK', id, true, ''],
        );
      }
    });
  });

  describe(
    `the gateway's own challenge in front of ${name} without NIP-42`,
    { timeout: 120_000, skip: suite.skip },
    () => {
      const setup = relayAndGateway(suite, false, {
        auth: { challenge: 'gateway' },
        authRequiredForWrites: true,
      });

      it('the gateway answers AUTH, the key is charged, the relay never sees AUTH', async () => {
        const client = await setup.connect('127.0.21.21');
        const early = signedEvent(1, 'before AUTH');
        const refused = await client.okFor(early.id, ['EVENT', early]);
        assert.match(String(refused[3]), /^auth-required: /);
        const { sk, id } = await sendAuth(client);
        await client.until((m) => m.some((x) => x[0] === 'OK' && x[1] === id));
        assert.deepEqual(
          client.received.find((x) => x[0] === 'OK' && x[1] === id),
          ['OK', id, true, ''],
        );
        const write = signedEvent(1, `after the gateway's AUTH, in front of ${name}`);
        const ok = await client.okFor(write.id, ['EVENT', write]);
        assert.equal(ok[2], true, JSON.stringify(ok));
        assert.equal(await relayHas(setup.relay().url, write.id), true);
        assert.equal(await writesConsumed(setup.gw(), `auth:${getPublicKey(sk)}`), 1, 'the key');
        assert.equal(await writesConsumed(setup.gw(), 'ip:127.0.21.21'), 1, 'and the address');
        // nostr-rs-relay answers in order, so what it says to an AUTH would come before this
        // EOSE (khatru handles each message on a goroutine of its own: there, no order).
        client.send(['REQ', 'caught-up', { ids: ['0'.repeat(64)] }]);
        await client.until((m) => m.some((x) => x[0] === 'EOSE' && x[1] === 'caught-up'));
        const seen = (verb: string) => client.received.filter((m) => m[0] === verb);
        assert.equal(seen('AUTH').length, 1, "one challenge, the gateway's");
        assert.equal(seen('OK').filter((m) => m[1] === id).length, 1, 'one answer to AUTH');
        assert.deepEqual(seen('NOTICE'), [], 'nothing from the relay about AUTH');
      });

      it(`${name} itself refuses that AUTH (what the client is spared)`, async () => {
        // nostr-rs-relay with NIP-42 off refuses any AUTH; khatru always checks AUTH, and this
        // one names a relay URL that is not its own.
        const direct = await setup.connectDirect();
        const auth = finalizeEvent(makeAuthEvent(PUBLIC_URL, 'any'), generateSecretKey());
        const ok = await direct.okFor(auth.id, ['AUTH', auth]);
        assert.equal(ok[2], false, JSON.stringify(ok));
      });
    },
  );
}
