/**
 * Attack, in front of the khatru relay: forgeries in a known author's name (charged to it on
 * their hash and forwarded) whose signature khatru cannot even parse (r = 2^256 - 1, past the
 * field's prime). khatru answers those `error: failed to verify signature`, not `invalid:`;
 * the gateway checks every refusal of an event it forwarded on its hash, so they are given
 * back to the author and counted against the connection like any forgery (closed at the
 * bound, 1008). Skipped, with the reason, where the khatru relay is not built.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { generateSecretKey, getPublicKey } from 'nostr-tools/pure';
import { writesConsumedReach } from '../helpers/gateway.js';
import { inNameOf, signedEvent } from '../helpers/nostr-events.js';
import { RawNostr } from '../helpers/raw-nostr.js';
import { relayBehindGateway, relayUnderSuite } from '../helpers/third-party-relays.js';

const KHATRU = relayUnderSuite('khatru');
const MAX_INVALID = 3;

describe(
  'signatures khatru cannot parse, on the hashed path',
  { timeout: 60_000, skip: KHATRU.skip },
  () => {
    const setup = relayBehindGateway(KHATRU, {
      identity: { order: ['pubkey', 'ip'] },
      nostr: { verify: 'auto', maxInvalidEvents: MAX_INVALID },
    });

    it("are given back to their author and close the forger's connection", async () => {
      const sk = generateSecretKey();
      const victimKey = getPublicKey(sk);
      const victim = await setup.connect('127.0.22.5');
      const mine = (n: number) => signedEvent(1, `mine ${n}`, sk);
      // One write: this gateway now knows the victim has room, so events in its name are
      // charged to it on their hash alone, and the relay verifies them.
      const first = mine(0);
      const ok = await victim.okFor(first.id, ['EVENT', first]);
      assert.equal(ok[2], true, JSON.stringify(ok));
      const unparsable = (n: number) => inNameOf(victimKey, `not mine ${n}`, 'f'.repeat(128));
      const attacker = await RawNostr.open(setup.gw().url, '127.0.22.6');
      for (let i = 0; i < MAX_INVALID; i++) attacker.send(['EVENT', unparsable(i)]);
      // The NOTICE comes with the close (1008), at the bound.
      await attacker.until('the NOTICE that closes it', (m) => m.some((x) => x[0] === 'NOTICE'));
      attacker.close();
      const oks = attacker.received.filter((m) => m[0] === 'OK');
      assert.equal(oks.length, MAX_INVALID, `each answered: ${JSON.stringify(attacker.received)}`);
      assert.ok(
        oks.every((m) => m[2] === false && String(m[3]) === 'error: failed to verify signature'),
        `khatru's own words reach the client: ${JSON.stringify(oks)}`,
      );
      const notice = attacker.received.find((m) => m[0] === 'NOTICE');
      assert.match(String(notice?.[1]), /^restricted: too many events that do not verify/);
      // Every forgery's charge went back: the victim pays for its one event, and writes on.
      assert.equal(
        await writesConsumedReach(setup.gw(), `pk:${victimKey}`, 1),
        1,
        "the victim's counter holds its own event only",
      );
      const next = mine(1);
      const again = await victim.okFor(next.id, ['EVENT', next]);
      assert.equal(again[2], true, 'the victim is served');
    });
  },
);
