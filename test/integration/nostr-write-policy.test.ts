/**
 * A relay operator's write policy through the gateway, over real WebSockets to the reference
 * relay: costs by kind and size, blocked kinds, free kinds.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { generateSecretKey, getPublicKey } from 'nostr-tools/pure';
import { writesConsumed } from '../helpers/gateway.js';
import { minedEvent, relayHas, signedEvent, unminedEvent } from '../helpers/nostr-events.js';
import { nostrSuite } from '../helpers/nostr-suite.js';

const LIMIT = 100;

describe('event costs by kind and size', { timeout: 90_000 }, () => {
  const suite = nostrSuite({
    client: 'iovalkey',
    mode: 'standalone',
    limit: LIMIT,
    settings: {
      identity: { order: ['pubkey', 'ip'] },
      nostr: {
        costs: {
          kinds: { '1': 1, '1984': 20, '20000-29999': 0 },
          default: 1,
          perKiB: { points: 2, freeBytes: 1024 },
        },
        blockedKinds: [4, '1000-1099'],
      },
    },
  });
  const connect = suite.connect;
  const gw = () => suite.gw();

  it('a kind-1984 event spends 20 points of its sender and of its author', async () => {
    const client = await connect('127.0.13.2');
    const sk = generateSecretKey();
    const report = signedEvent(1984, 'spam report', sk);
    assert.equal((await client.okFor(report.id, ['EVENT', report]))[2], true);
    assert.equal(await writesConsumed(gw(), 'ip:127.0.13.2'), 20);
    assert.equal(await writesConsumed(gw(), `pk:${getPublicKey(sk)}`), 20);
    const note = signedEvent(1, 'a note', sk);
    assert.equal((await client.okFor(note.id, ['EVENT', note]))[2], true);
    assert.equal(await writesConsumed(gw(), 'ip:127.0.13.2'), 21, 'a kind-1 note costs one');
  });

  it('an event above the free size pays per started KiB', async () => {
    const client = await connect('127.0.13.3');
    const big = signedEvent(1, 'x'.repeat(3000));
    const bytes = Buffer.byteLength(JSON.stringify(['EVENT', big]));
    const expected = 1 + Math.ceil((bytes - 1024) / 1024) * 2;
    assert.equal((await client.okFor(big.id, ['EVENT', big]))[2], true);
    assert.equal(await writesConsumed(gw(), 'ip:127.0.13.3'), expected);
    assert.ok(expected >= 7, `${bytes} bytes cost ${expected} points`);
  });

  it('refuses blocked kinds with blocked:, charging nothing and forwarding nothing', async () => {
    const client = await connect('127.0.13.4');
    for (const kind of [4, 1050]) {
      const dm = signedEvent(kind, 'blocked');
      const ok = await client.okFor(dm.id, ['EVENT', dm]);
      assert.equal(ok[2], false);
      assert.match(String(ok[3]), new RegExp(`^blocked: events of kind ${kind} `));
      assert.equal(await relayHas(suite.relay().url, dm.id), false, 'the relay never saw it');
    }
    assert.equal(await writesConsumed(gw(), 'ip:127.0.13.4'), 0);
    const allowed = signedEvent(1100, 'just past the blocked range');
    assert.equal((await client.okFor(allowed.id, ['EVENT', allowed]))[2], true);
  });

  it('admits a kind priced 0 without consuming, even once the quota is spent', async () => {
    const client = await connect('127.0.13.5');
    for (let i = 0; i < LIMIT / 20; i++) {
      const report = signedEvent(1984, `report ${i}`);
      assert.equal((await client.okFor(report.id, ['EVENT', report]))[2], true);
    }
    assert.equal(await writesConsumed(gw(), 'ip:127.0.13.5'), LIMIT);
    const note = signedEvent(1, 'one too many');
    const refused = await client.okFor(note.id, ['EVENT', note]);
    assert.equal(refused[2], false);
    assert.match(String(refused[3]), /^rate-limited: /);
    const ephemeral = signedEvent(20001, 'typing...');
    const ok = await client.okFor(ephemeral.id, ['EVENT', ephemeral]);
    assert.equal(ok[2], true, `an ephemeral event priced 0 is forwarded: ${String(ok[3])}`);
  });
});

describe('proof of work (NIP-13)', { timeout: 90_000 }, () => {
  const MIN = 4;
  const suite = nostrSuite({
    client: 'valkey-glide',
    mode: 'cluster',
    limit: LIMIT,
    settings: {
      identity: { order: ['pubkey', 'ip'] },
      nostr: {
        costs: { kinds: { '1984': 20 } },
        // Half price per 4 bits above the minimum.
        pow: { minDifficulty: MIN, discount: { perBits: 4, factor: 0.5 } },
      },
    },
  });
  const connect = suite.connect;
  const gw = () => suite.gw();

  it('refuses an event below the minimum with pow:, naming the required difficulty', async () => {
    const client = await connect('127.0.14.2');
    const lazy = unminedEvent(1, 'no work', MIN);
    const ok = await client.okFor(lazy.id, ['EVENT', lazy]);
    assert.equal(ok[2], false);
    assert.match(
      String(ok[3]),
      new RegExp(`^pow: difficulty \\d is below the required ${MIN}; mine at least ${MIN} bits`),
    );
    assert.equal(await relayHas(suite.relay().url, lazy.id), false);
    const worked = minedEvent(1, 'some work', MIN);
    assert.equal((await client.okFor(worked.id, ['EVENT', worked]))[2], true);
  });

  it('credits the committed target, not the luck beyond it', async () => {
    const client = await connect('127.0.14.3');
    // At least 8 zero bits, but its nonce commits to 2: it counts as 2, below the minimum.
    const lucky = minedEvent(1, 'lucky', 8, 2);
    const ok = await client.okFor(lucky.id, ['EVENT', lucky]);
    assert.equal(ok[2], false);
    assert.match(
      String(ok[3]),
      new RegExp(`^pow: difficulty 2 is below the required ${MIN}; mine at least ${MIN} bits`),
    );
  });

  it('discounts work: half price per 4 bits above the minimum', async () => {
    const client = await connect('127.0.14.4');
    const atMinimum = minedEvent(1984, 'report at the minimum', MIN);
    assert.equal((await client.okFor(atMinimum.id, ['EVENT', atMinimum]))[2], true);
    assert.equal(await writesConsumed(gw(), 'ip:127.0.14.4'), 20, 'full price at the minimum');
    const sk = generateSecretKey();
    const hard = minedEvent(1984, 'report with work', MIN + 8, MIN + 8, sk);
    assert.equal((await client.okFor(hard.id, ['EVENT', hard]))[2], true);
    assert.equal(await writesConsumed(gw(), 'ip:127.0.14.4'), 20 + 5, 'a quarter for 8 bits more');
    assert.equal(await writesConsumed(gw(), `pk:${getPublicKey(sk)}`), 5, 'its author too');
  });

  it('charges a forged id claiming work full price, as an event that does not verify', async () => {
    const client = await connect('127.0.14.5');
    const mined = minedEvent(1984, 'original', MIN + 8);
    // Same id and signature, other content: the id is not its hash any more.
    const forged = { ...mined, content: 'tampered' };
    const ok = await client.okFor(forged.id, ['EVENT', forged]);
    assert.equal(ok[2], false);
    assert.match(String(ok[3]), /^invalid: event id does not match its content/);
    assert.equal(await writesConsumed(gw(), 'ip:127.0.14.5'), 20, 'no discount for a false id');
    // An id made of zeros, hashed from nothing: the same.
    const zeros = { ...signedEvent(1, 'fake work'), id: '0'.repeat(16) + 'f'.repeat(48) };
    const fake = await client.okFor(zeros.id, ['EVENT', zeros]);
    assert.equal(fake[2], false);
    assert.match(String(fake[3]), /^invalid: /);
    assert.equal(await writesConsumed(gw(), 'ip:127.0.14.5'), 21);
    assert.equal(await relayHas(suite.relay().url, mined.id), false);
  });
});
