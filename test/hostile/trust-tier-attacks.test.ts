/**
 * nostr.trust from an attacker's side, over raw sockets against a real gateway, the reference
 * relay holding the follow lists and Valkey: a spam wave of rotating fresh keys is refused
 * while followed users (same address) write at their tier's quota, with refreshes running
 * under it; follow lists published by keys outside the set bring no one in; a follow list of
 * 10^5 p-tags is read to maxFollowsPerList; only the latest kind 3 counts; and, from a
 * hostile relay of the test's own, forged lists, junk frames and an oversized event are
 * ignored, and a relay gone silent leaves the set in force.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { finalizeEvent, generateSecretKey, getEventHash, getPublicKey } from 'nostr-tools/pure';
import type { Event } from 'nostr-tools/pure';
import { NostrClient, admin, metricValue, startGateway } from '../helpers/gateway.js';
import type { GatewayUnderTest } from '../helpers/gateway.js';
import { followListRelay } from '../helpers/follow-relay.js';
import { signedEvent } from '../helpers/nostr-events.js';
import { nostrSuite } from '../helpers/nostr-suite.js';
import { RawNostr } from '../helpers/raw-nostr.js';
import { waitFor } from '../helpers/raw-socket.js';

const DEFAULT_POINTS = 8;
const TRUSTED_POINTS = 12;
const MAX_FOLLOWS = 1000;

interface Key {
  sk: Uint8Array;
  pk: string;
}
const key = (): Key => {
  const sk = generateSecretKey();
  return { sk, pk: getPublicKey(sk) };
};
const filler = (i: number) => createHash('sha256').update(`filler${i}`).digest('hex');

function followList(by: Key, follows: string[], createdAt = Math.floor(Date.now() / 1000)): Event {
  const tags = follows.map((pk) => ['p', pk]);
  return finalizeEvent({ kind: 3, created_at: createdAt, tags, content: '' }, by.sk);
}

/** Written straight to the relay (the gateway's quotas are not what this tests). */
async function publish(relayUrl: string, events: Event[]): Promise<void> {
  const client = await NostrClient.connect(relayUrl);
  try {
    for (const e of events) {
      const ok = await client.okFor(e.id, ['EVENT', e], 30_000);
      assert.equal(ok[2], true, `the relay refused a follow list: ${String(ok[3])}`);
    }
  } finally {
    client.close();
  }
}

async function tierOf(gw: GatewayUnderTest, pk: string): Promise<string> {
  const res = await admin(gw, 'GET', `/admin/clients/pk:${pk}`);
  return (JSON.parse(res.body) as { tier: string }).tier;
}

const waitTier = (gw: GatewayUnderTest, pk: string, tier: string, what: string) =>
  waitFor(`${what} in tier ${tier}`, async () => (await tierOf(gw, pk)) === tier, 30_000);

async function trustPubkeys(gw: GatewayUnderTest): Promise<number> {
  const res = await admin(gw, 'GET', '/metrics');
  const line = res.body.split('\n').find((l) => l.startsWith('sluice_trust_pubkeys '));
  return line ? Number(line.split(' ').pop()) : 0;
}

const refreshes = (gw: GatewayUnderTest, outcome: string) =>
  metricValue(gw, 'sluice_trust_refreshes_total', `outcome="${outcome}"`);

// The graph: SEED follows A, B and HUGE; A follows C; C follows D (hop 3: outside at hops 2).
const SEED = key();
const [A, B, C, D, HUGE] = [key(), key(), key(), key(), key()];
// Keys outside: a spammer following the seed and its own fresh keys, and those keys.
const SPAMMER = key();
const SPAM_FRIENDS = [key(), key()];

describe('a trust tier from the follow graph, attacked', { timeout: 240_000 }, () => {
  const suite = nostrSuite({
    client: 'iovalkey',
    mode: 'standalone',
    limit: DEFAULT_POINTS,
    // A follow list of 10^5 p-tags is about 7 MB.
    relayArgs: ['--max-event-bytes', String(8 * 1024 * 1024)],
    settings: {
      identity: { order: ['pubkey', 'ip'] },
      quotas: {
        keyPrefix: `trust${Date.now().toString(36)}`,
        tiers: {
          default: { write: { points: DEFAULT_POINTS, windowSec: 60 } },
          followed: { write: { points: TRUSTED_POINTS, windowSec: 60 }, chargeAddress: false },
        },
      },
      nostr: {
        trust: {
          tier: 'followed',
          seeds: [SEED.pk],
          hops: 2,
          refreshSec: 1,
          timeoutSec: 20,
          maxFollowsPerList: MAX_FOLLOWS,
          authorsPerReq: 50,
          maxEventBytes: 16 * 1024 * 1024,
        },
      },
    },
  });

  before(async () => {
    const huge = Array.from({ length: 100_000 }, (_, i) => filler(i));
    await publish(suite.relay().url, [
      followList(SEED, [A.pk, B.pk, HUGE.pk]),
      followList(A, [C.pk]),
      followList(C, [D.pk]),
      followList(HUGE, huge),
      followList(SPAMMER, [SEED.pk, ...SPAM_FRIENDS.map((k) => k.pk)]),
      ...SPAM_FRIENDS.map((k) => followList(k, [SPAMMER.pk, A.pk])),
    ]);
    await waitTier(suite.gw(), C.pk, 'followed', 'C (hop 2)');
    await waitTier(suite.gw(), filler(0), 'followed', "the first of HUGE's follows");
  });

  it('grants the tier within hops, and follow lists from outside bring no one in', async () => {
    const gw = suite.gw();
    for (const k of [SEED, A, B, C, HUGE]) assert.equal(await tierOf(gw, k.pk), 'followed');
    // Hop 3, and keys whose only followers are outside the set (or who follow the seed).
    for (const k of [D, SPAMMER, ...SPAM_FRIENDS]) assert.equal(await tierOf(gw, k.pk), 'default');
  });

  it('reads a follow list of 10^5 p-tags to maxFollowsPerList, in its order', async () => {
    const gw = suite.gw();
    assert.equal(await tierOf(gw, filler(0)), 'followed');
    assert.equal(await tierOf(gw, filler(MAX_FOLLOWS - 1)), 'followed');
    assert.equal(await tierOf(gw, filler(MAX_FOLLOWS)), 'default');
    assert.equal(await tierOf(gw, filler(99_999)), 'default');
    // Seed, A, B, HUGE, C and the first MAX_FOLLOWS of HUGE's list.
    assert.equal(await trustPubkeys(gw), 5 + MAX_FOLLOWS);
  });

  it('counts only the latest follow list of an author (kind 3 is replaceable)', async () => {
    const gw = suite.gw();
    const now = Math.floor(Date.now() / 1000);
    const E = key();
    // An older list of the seed's naming E, then a newer one without B: E never enters, B leaves.
    await publish(suite.relay().url, [
      followList(SEED, [A.pk, B.pk, HUGE.pk, E.pk], now - 3600),
      followList(SEED, [A.pk, HUGE.pk], now + 1),
    ]);
    await waitTier(gw, B.pk, 'default', 'B, dropped from the newer list');
    assert.equal(await tierOf(gw, E.pk), 'default');
    assert.equal(await tierOf(gw, A.pk), 'followed');
  });

  it('refuses a wave of rotating keys while followed users write at their quota', async () => {
    const gw = suite.gw();
    const from = '127.0.44.2'; // one address: the spammer and the followed users alike
    const okBefore = await refreshes(gw, 'ok');
    const spammer = await RawNostr.open(gw.url, from);
    const followed = [SEED, A, C];
    const users = await Promise.all(followed.map(() => RawNostr.open(gw.url, from)));
    try {
      const accepted = (answers: unknown[][]) => answers.filter((a) => a[2] === true).length;
      const spam: unknown[][] = [];
      const written: unknown[][][] = followed.map(() => []);
      const send = async (raw: RawNostr, e: Event) => {
        raw.send(['EVENT', e]);
        return raw.okFor(e.id);
      };
      // Rounds until the wave has lasted past two refreshes (refreshSec 1): a refresh never
      // holds a write, and the set it swaps in serves the next one.
      for (
        let round = 0;
        round < TRUSTED_POINTS + 2 || (await refreshes(gw, 'ok')) < okBefore + 2;
        round++
      ) {
        spam.push(await send(spammer, signedEvent(1, `spam ${round}`)));
        if (round < TRUSTED_POINTS + 2) {
          const sent = followed.map((k, i) =>
            send(users[i]!, signedEvent(1, `post ${round}`, k.sk)),
          );
          (await Promise.all(sent)).forEach((ok, i) => written[i]!.push(ok));
        }
        assert.ok(round < 2000, 'the refreshes did not come');
      }
      // The wave paid the shared address: DEFAULT_POINTS accepted, every later key refused.
      assert.equal(accepted(spam), DEFAULT_POINTS);
      for (const ok of spam.slice(DEFAULT_POINTS)) assert.match(String(ok[3]), /^rate-limited:/);
      // Each followed user: exactly its tier's quota, in order, then rate-limited.
      for (const answers of written) {
        assert.deepEqual(
          answers.map((a) => a[2]),
          [...Array<boolean>(TRUSTED_POINTS).fill(true), false, false],
        );
        assert.match(String(answers[TRUSTED_POINTS]![3]), /^rate-limited:/);
      }
    } finally {
      spammer.close();
      users.forEach((u) => u.close());
    }
  });
});

describe('a hostile or silent relay feeding the follow graph', { timeout: 120_000 }, () => {
  const suite = nostrSuite({
    client: 'iovalkey',
    mode: 'standalone',
    limit: DEFAULT_POINTS,
    settings: {},
  });
  const [S1, S2, G, F] = [key(), key(), key(), key()];
  const genuine = followList(S1, [G.pk]);
  // S1's list with F added, its id recomputed and the old signature kept: a forgery.
  const forgedBase = { ...genuine, tags: [['p', F.pk]], created_at: genuine.created_at + 10 };
  const forged = { ...forgedBase, id: getEventHash(forgedBase) };
  let mode: 'hostile' | 'silent' = 'hostile';
  let relay: Awaited<ReturnType<typeof followListRelay>> | undefined;
  const answer = (authors: string[], send: (frame: string) => void) => {
    if (mode === 'silent') return; // never answers
    send('not json at all');
    send(JSON.stringify(['EVENT', 'another-sub', followList(S1, [F.pk])]));
    send(JSON.stringify(['EVENT', '$SUB', { kind: 3, pubkey: 'zz', tags: 'x' }]));
    send(JSON.stringify(['EVENT', '$SUB', followList(key(), [F.pk])])); // a stranger's list
    if (authors.includes(S1.pk)) {
      send(JSON.stringify(['EVENT', '$SUB', forged]));
      send(JSON.stringify(['EVENT', '$SUB', genuine]));
    }
    // S2's list is over maxEventBytes: the reader leaves it out, keeping S1's.
    if (authors.includes(S2.pk))
      send(JSON.stringify(['EVENT', '$SUB', followList(S2, Array<string>(2000).fill(F.pk))]));
    send(JSON.stringify(['EOSE', '$SUB']));
  };
  let gw: GatewayUnderTest | undefined;
  before(async () => {
    relay = await followListRelay(answer);
    gw = await startGateway('iovalkey', 'standalone', [{ id: 'relay-a', url: suite.relay().url }], {
      identity: { order: ['pubkey', 'ip'] },
      quotas: {
        keyPrefix: `trusth${Date.now().toString(36)}`,
        tiers: {
          default: { write: { points: DEFAULT_POINTS, windowSec: 60 } },
          followed: { write: { points: TRUSTED_POINTS, windowSec: 60 } },
        },
      },
      nostr: {
        trust: {
          tier: 'followed',
          seeds: [S1.pk, S2.pk],
          hops: 1,
          relay: relay.url,
          refreshSec: 1,
          timeoutSec: 1,
          maxEventBytes: 64 * 1024,
        },
      },
    });
  });
  after(async () => {
    relay?.close();
    await gw?.proc.stop();
  });

  it('ignores forged lists, junk frames and an oversized event', async () => {
    await waitTier(gw!, G.pk, 'followed', 'G (from the genuine list)');
    assert.equal(await tierOf(gw!, F.pk), 'default');
    assert.equal(await tierOf(gw!, S2.pk), 'followed'); // a seed, whatever its list
    assert.equal(await trustPubkeys(gw!), 3);
  });

  it('keeps the set in force while the relay answers nothing', async () => {
    mode = 'silent';
    const failed = await refreshes(gw!, 'failed');
    await waitFor(
      'two refreshes timed out',
      async () => (await refreshes(gw!, 'failed')) >= failed + 2,
      30_000,
    );
    assert.equal(await tierOf(gw!, G.pk), 'followed');
    // And writes are served meanwhile, G at its tier.
    const client = await suite.connect('127.0.45.2');
    const e = signedEvent(1, 'written while the relay is silent', G.sk);
    assert.equal((await client.okFor(e.id, ['EVENT', e]))[2], true);
  });
});
