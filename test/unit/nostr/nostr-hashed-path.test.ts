/**
 * The default Nostr path (`verify: auto`, pubkey identity) in process: the real admission
 * step, session and quota decider, on the fake store. An author far from its limit is charged
 * on the event's hash alone and refunded when the relay does not store the event, and so is
 * one unknown here (one write at a time); near its limit the gateway verifies before the
 * author pays. An event with a good id
 * and a bad signature shows which path judged it: the hashed path forwards it, the verified
 * path refuses it.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { generateSecretKey, getPublicKey } from 'nostr-tools/pure';
import type { Event } from 'nostr-tools/pure';
import type { ConnectionFacts } from '../../../src/gateway/admission.js';
import { settleActions } from '../../helpers/settle.js';
import { QuotaDecider } from '../../../src/quota/decider.js';
import type { NodeMultipliers } from '../../../src/quota/multipliers.js';
import { pubkeyIdentity } from '../../../src/quota/policy.js';
import { admissionUnderTest } from '../../helpers/fake-admission-context.js';
import { FakeValkey, manualClock } from '../../helpers/fake-valkey.js';
import { signedEvent } from '../../helpers/nostr-events.js';

const LIMIT = 8;
const NODE = 'relay-a';

function setUp() {
  const under = admissionUnderTest(
    {
      identity: { order: ['pubkey', 'ip'] },
      nostr: { verify: 'auto', maxInvalidEvents: 3 },
      quotas: {
        tiers: { default: { write: { points: LIMIT, windowSec: 60 } } },
        apiKeys: {},
      },
      limits: { framesPerSecPerAddress: 1_000_000 },
    },
    [],
  );
  const clock = manualClock(Date.now());
  const valkey = new FakeValkey(clock.now);
  const multipliers: NodeMultipliers = { get: () => ({ value: 1 }), onChange: () => undefined };
  const decider = new QuotaDecider(
    valkey.store,
    under.ctx.policy,
    multipliers,
    under.config.quotas,
    {
      now: clock.now,
    },
  );
  under.ctx.decider = decider;
  const sk = generateSecretKey();
  const pubkey = getPublicKey(sk);
  const author = pubkeyIdentity('pubkey', pubkey, under.ctx.policy, under.config.identity.keySalt);
  const conn: ConnectionFacts = {
    ip: '203.0.113.30',
    nodeId: NODE,
    session: under.admission.newSession(),
  };
  const send = (event: Event) =>
    under.admission.frame(conn, Buffer.from(JSON.stringify(['EVENT', event])), false);
  /** A second connection, from another address, and what it sends. */
  const otherConnection = () => {
    const other: ConnectionFacts = {
      ...conn,
      ip: '203.0.113.31',
      session: under.admission.newSession(),
    };
    const from = (e: Event) =>
      under.admission.frame(other, Buffer.from(JSON.stringify(['EVENT', e])), false);
    return { other, from };
  };
  /** The relay's answer, as the pump hands it to the session; what the session asked is done. */
  const relay = async (message: unknown[]): Promise<string[]> => {
    const actions = conn.session.relay(Buffer.from(JSON.stringify(message)));
    return (await settleActions(conn.session, actions)).map((s) => s.replace(/ shared=.*/, ''));
  };
  /** The same, with each claim saying whether it was shared. */
  const relayClaims = (message: unknown[]): Promise<string[]> =>
    settleActions(conn.session, conn.session.relay(Buffer.from(JSON.stringify(message))));
  /** What the author paid: Valkey's count less the points leased here and not yet spent. */
  const paid = async () => {
    const usage = (await decider.usage(author, 'write', NODE))!;
    return usage.consumed - (usage.lease?.held ?? 0);
  };
  const genuine = (n: number) => signedEvent(1, `note ${n}`, sk);
  /** An event of this author's whose id is right and whose signature is another event's. */
  const badSignature = (n: number): Event => ({ ...genuine(n), sig: signedEvent(1, 'x').sig });
  return {
    under,
    valkey,
    author,
    decider,
    conn,
    send,
    otherConnection,
    relay,
    relayClaims,
    paid,
    genuine,
    badSignature,
  };
}

/**
 * Twelve forgeries sent at once from twelve addresses while the store is slow (every charge
 * waits until all twelve have been judged): their verdicts.
 */
async function forgeriesAtOnce(
  under: ReturnType<typeof setUp>['under'],
  decider: QuotaDecider,
  badSignature: (n: number) => Event,
) {
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  const decide = decider.decide.bind(decider);
  decider.decide = async (req) => {
    await gate;
    return decide(req);
  };
  const conns = Array.from({ length: 12 }, (_, i) => ({
    ip: `198.51.100.${i + 1}`,
    nodeId: NODE,
    session: under.admission.newSession(),
  }));
  const pending = conns.map((c, i) =>
    under.admission.frame(c, Buffer.from(JSON.stringify(['EVENT', badSignature(i + 1)])), false),
  );
  await new Promise((resolve) => setImmediate(resolve));
  open();
  const verdicts = await Promise.all(pending);
  decider.decide = decide;
  return verdicts;
}

describe(
  'the hashed path: authors far from their limit pay on the hash',
  { timeout: 30_000 },
  () => {
    it('an unknown author is charged on its hash, one write at a time; the relay proves it', async () => {
      const { send, relay, paid, genuine, badSignature } = setUp();
      const forged = badSignature(0);
      const first = await send(forged);
      assert.equal(first.forward, true, 'unknown: forwarded on its hash');
      assert.equal(await paid(), 1, 'charged before the relay saw it');
      await relay(['OK', forged.id, false, 'invalid: bad signature']);
      assert.equal(await paid(), 0, "the relay's invalid: gave it back");
      const ok = genuine(1);
      assert.equal((await send(ok)).forward, true);
      await relay(['OK', ok.id, true, '']);
      assert.equal(await paid(), 1);
      const bad = badSignature(2);
      assert.equal((await send(bad)).forward, true, 'with room: forwarded on its hash');
      assert.equal(await paid(), 2, 'charged before the relay saw it');
    });

    it("the relay's refusal or duplicate gives the author its points back", async () => {
      const { send, relay, paid, genuine } = setUp();
      const [a, b, c] = [genuine(1), genuine(2), genuine(3)];
      await send(a);
      await relay(['OK', a.id, true, '']);
      for (const e of [b, c]) assert.equal((await send(e)).forward, true);
      assert.equal(await paid(), 3);
      const refused = await relay(['OK', b.id, false, 'blocked: not here']);
      assert.deepEqual(refused, ['refund-author']);
      const dup = await relay(['OK', c.id, true, 'duplicate: have it']);
      assert.deepEqual(dup, ['refund-author', 'claim']);
      assert.equal(await paid(), 1, 'only what the relay stored is paid for');
    });

    /**
     * Three forgeries in a known author's name, forwarded on their hash, each refused by the
     * relay in `words`: what settling each did, the connection's count, what the author paid.
     */
    async function refusedForgeries(
      forge: (author: ReturnType<typeof setUp>, n: number) => Event,
      words: string,
    ) {
      const author = setUp();
      const { conn, send, relay, paid, genuine } = author;
      const first = genuine(0);
      await send(first);
      await relay(['OK', first.id, true, '']);
      const kinds: string[][] = [];
      for (let n = 1; n <= 3; n++) {
        const bad = forge(author, n);
        assert.equal((await send(bad)).forward, true);
        kinds.push(await relay(['OK', bad.id, false, words]));
      }
      assert.deepEqual(kinds, [
        ['refund-author', 'invalid'],
        ['refund-author', 'invalid'],
        ['refund-author', 'invalid', 'close'],
      ]);
      assert.equal(conn.session.invalidEvents, 3);
      assert.equal(await paid(), 1);
    }

    it('a bad signature the relay refuses is confirmed here, refunded, and counted: the connection closes at the bound', async () => {
      await refusedForgeries((a, n) => a.badSignature(n), 'invalid: bad signature');
    });

    it("a forgery a relay refuses without invalid: (khatru's error: for a signature it cannot parse) is confirmed here and counted the same", async () => {
      // r at 2^256 - 1, past the field's prime: khatru's parser refuses it before verifying.
      const unparsable = (a: ReturnType<typeof setUp>, n: number) => ({
        ...a.genuine(n),
        sig: 'f'.repeat(128),
      });
      await refusedForgeries(unparsable, 'error: failed to verify signature');
    });

    it("a relay's invalid: for an event that verifies counts nothing against the sender", async () => {
      const { conn, send, relay, genuine } = setUp();
      const [a, b] = [genuine(0), genuine(1)];
      await send(a);
      await relay(['OK', a.id, true, '']);
      await send(b);
      const actions = await relay(['OK', b.id, false, 'invalid: created_at too far off']);
      assert.deepEqual(actions, ['refund-author']);
      assert.equal(conn.session.invalidEvents, 0);
    });

    it('near its limit, every event is verified before the author pays', async () => {
      const { send, relay, paid, genuine, badSignature } = setUp();
      // The margin is a quarter of the limit: 2 of 8. Six stored leave exactly the margin.
      for (let n = 0; n < 6; n++) {
        const e = genuine(n);
        assert.equal((await send(e)).forward, true);
        await relay(['OK', e.id, true, '']);
      }
      assert.equal(await paid(), 6);
      const bad = await send(badSignature(6));
      assert.equal(bad.forward, false, 'verified: refused at the gateway');
      assert.equal(await paid(), 6, 'and the author paid nothing');
    });

    it('a hashed charge refused by the counter is judged as a verified one: a forgery is given back', async () => {
      const { valkey, author, send, relay, paid, genuine, badSignature } = setUp();
      const e = genuine(0);
      await send(e);
      await relay(['OK', e.id, true, '']);
      // Another gateway spent the rest of the author's window: this one's hint is stale.
      for (const [id, c] of valkey.counters) if (id.endsWith(author.key)) c.consumed = LIMIT;
      const bad = await send(badSignature(1));
      assert.equal(bad.forward, false);
      assert.match(String(bad.reply?.[3]), /^invalid: /, 'a forgery, not a rate limit');
      assert.equal(await paid(), LIMIT, 'its refused charge given back');
      const late = await send(genuine(2));
      assert.match(String(late.reply?.[3]), /^rate-limited: /);
    });

    it('an event forwarded on its hash and never answered is refunded if it does not verify', async () => {
      const { conn, send, relay, paid, genuine, badSignature } = setUp();
      const e = genuine(0);
      await send(e);
      await relay(['OK', e.id, true, '']);
      await send(genuine(1));
      await send(badSignature(2));
      assert.equal(await paid(), 3);
      const gone = await settleActions(conn.session, conn.session.upstreamGone());
      assert.deepEqual(gone, ['refund-author'], 'the genuine one may be stored: it stays paid');
      assert.equal(await paid(), 2);
    });

    it('an author known over its limit is refused before its signature is checked; a replay is still a duplicate', async () => {
      const { otherConnection, send, relay, genuine, badSignature } = setUp();
      const first = genuine(0);
      await send(first);
      await relay(['OK', first.id, true, '']);
      // Spend the rest of the author's limit, then one more: refused, and now known over it.
      for (let n = 1; n <= LIMIT; n++) {
        const e = genuine(n);
        const verdict = await send(e);
        if (verdict.forward) await relay(['OK', e.id, true, '']);
        else assert.match(String(verdict.reply?.[3]), /^rate-limited:/);
      }
      // From another address (this one spent its own quota on those frames).
      const { other, from } = otherConnection();
      const forged = await from(badSignature(99));
      assert.equal(forged.forward, false);
      assert.match(String(forged.reply?.[3]), /^rate-limited:/, 'refused unverified');
      assert.equal(other.session.invalidEvents, 0, 'nothing counted against the connection');
      assert.match(String((await from(first)).reply?.[3]), /^duplicate:/);
    });

    it('only a verified event is claimed for every gateway; one charged on its hash is remembered here', async () => {
      const { under, otherConnection, send, relayClaims, paid, genuine } = setUp();
      // 8 points, a margin of 2: the first six are charged on their hash, the seventh verified.
      const hashed = Array.from({ length: 6 }, (_, n) => genuine(n));
      for (const e of hashed) {
        await send(e);
        assert.deepEqual(await relayClaims(['OK', e.id, true, '']), ['claim shared=false']);
      }
      const verified = genuine(6);
      await send(verified);
      assert.deepEqual(await relayClaims(['OK', verified.id, true, '']), ['claim shared=true']);
      // One claim in the store: the verified event's.
      assert.deepEqual(
        [...under.kv.keys.keys()],
        [`${under.config.quotas.keyPrefix}:seen:{${verified.id}}`],
      );
      // A replay of either through this process is answered from memory, its author spared
      // (sent from another address: this one has spent its own quota on those seven).
      const { from } = otherConnection();
      for (const e of [verified, hashed[0]!]) {
        const again = await from(e);
        assert.equal(again.forward, false);
        assert.match(String(again.reply?.[3]), /^duplicate:/);
      }
      assert.equal(await paid(), 7);
    });

    it('a copy of an event in flight here is answered without charging its author; a forged copy is judged as ever', async () => {
      const { otherConnection, send, relay, paid, genuine } = setUp();
      const event = genuine(1);
      assert.equal((await send(event)).forward, true, 'charged on its hash, awaited');
      const { from } = otherConnection();
      const copy = await from(event);
      assert.equal(copy.forward, false);
      assert.deepEqual(copy.reply?.slice(0, 3), ['OK', event.id, false]);
      assert.match(String(copy.reply?.[3]), /^duplicate: this event is in flight/);
      // Another signature under the same id is no copy: verified (the author known now, with
      // room: on its hash), so it cannot hold the genuine event back.
      const forged = { ...event, sig: genuine(2).sig };
      assert.equal((await from(forged)).forward, true, 'judged as any write of its author');
      assert.equal(await paid(), 2, 'the copy cost its author nothing');
      await relay(['OK', event.id, true, '']);
      assert.match(String((await from(event)).reply?.[3]), /^duplicate:/, 'then from memory');
    });

    it('forgeries sent at once from many connections hold at most the remaining points less the margin', async () => {
      const { under, decider, send, relay, paid, genuine, badSignature } = setUp();
      const first = genuine(0);
      await send(first);
      await relay(['OK', first.id, true, '']);
      assert.equal(await paid(), 1, 'known, 7 of 8 left');
      const verdicts = await forgeriesAtOnce(under, decider, badSignature);
      const held = verdicts.filter((v) => v.forward).length;
      // 7 left, a margin of 2: at most 5 judged on the hash, together; the rest verified (refused).
      assert.ok(held <= LIMIT - 1 - 2, `${held} forgeries held the victim's points at once`);
      assert.ok(held > 0, 'the hashed path was taken');
      const own = await send(genuine(99));
      assert.equal(own.forward, true, "the victim's own next event is admitted");
    });

    it('forgeries sent at once in the name of an author unknown here: one is judged on the hash', async () => {
      const { under, decider, send, paid, genuine, badSignature } = setUp();
      const verdicts = await forgeriesAtOnce(under, decider, badSignature);
      assert.equal(verdicts.filter((v) => v.forward).length, 1, "one held the victim's point");
      for (const v of verdicts.filter((x) => !x.forward)) {
        assert.match(String(v.reply?.[3]), /^invalid: /, 'the rest verified and refused');
      }
      assert.equal(await paid(), 1);
      assert.equal((await send(genuine(99))).forward, true, "the victim's own event is admitted");
    });
  },
);
