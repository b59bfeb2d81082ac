/**
 * Attacks on a tier that lifts the address (identity.pubkeyTiers, chargeAddress false), over
 * raw sockets against a real gateway, the reference relay and Valkey: replaying a listed
 * user's events, or claiming a listed pubkey with signatures that do not verify, is charged to
 * the sender (and closes that connection at nostr.maxInvalidEvents), never to the listed
 * user, while another client is served.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { generateSecretKey, getPublicKey } from 'nostr-tools/pure';
import type { Event } from 'nostr-tools/pure';
import { NostrClient, request, writesConsumed } from '../helpers/gateway.js';
import { signedEvent } from '../helpers/nostr-events.js';
import { nostrSuite } from '../helpers/nostr-suite.js';
import { RawNostr } from '../helpers/raw-nostr.js';
import { waitFor } from '../helpers/raw-socket.js';

const LIMIT = 3;
const MAX_INVALID = 2;
const paidSk = generateSecretKey();
const PAID = getPublicKey(paidSk);

const paidFile = path.join(mkdtempSync(path.join(tmpdir(), 'sluice-tier-attacks-')), 'paid.txt');
writeFileSync(paidFile, `${PAID}\n`);

describe('a lifting tier is not free to others', { timeout: 120_000 }, () => {
  const suite = nostrSuite({
    client: 'iovalkey',
    mode: 'standalone',
    limit: LIMIT,
    settings: {
      identity: { order: ['pubkey', 'ip'], pubkeyTiers: { paid: paidFile } },
      nostr: { maxInvalidEvents: MAX_INVALID },
      quotas: {
        keyPrefix: `tierattack${Date.now().toString(36)}`,
        tiers: {
          default: { write: { points: LIMIT, windowSec: 60 } },
          paid: { write: { points: 100, windowSec: 60 }, chargeAddress: false },
        },
      },
    },
  });
  const raws: RawNostr[] = [];
  after(() => raws.forEach((c) => c.close()));
  const open = async (from: string) => {
    const raw = await RawNostr.open(suite.gw().url, from);
    raws.push(raw);
    return raw;
  };
  /** The OK for `event` (earlier answers on `raw` are forgotten first). */
  const send = (raw: RawNostr, event: Event) => {
    raw.received.length = 0;
    raw.send(['EVENT', event]);
    return raw.okFor(event.id);
  };

  /** Another client, from its own address, is served while the attack runs. */
  async function othersServed(from: string): Promise<void> {
    const other = await suite.connect(from);
    const e = signedEvent(1, `served ${from}`);
    assert.equal((await other.okFor(e.id, ['EVENT', e]))[2], true);
  }

  it("replaying a listed user's events costs the replayer, not the user", async () => {
    const user = await suite.connect('127.0.32.2');
    const genuine = signedEvent(1, 'a paid member writes', paidSk);
    assert.equal((await user.okFor(genuine.id, ['EVENT', genuine]))[2], true);
    assert.equal(await writesConsumed(suite.gw(), `pk:${PAID}`), 1);

    const attacker = await open('127.0.32.3');
    const answers = [];
    for (let i = 0; i < LIMIT + 2; i++) {
      answers.push(await send(attacker, genuine));
    }
    assert.deepEqual(
      answers.map((a) => String(a[3]).split(':')[0]),
      [...Array<string>(LIMIT).fill('duplicate'), 'rate-limited', 'rate-limited'],
    );
    assert.equal(await writesConsumed(suite.gw(), 'ip:127.0.32.3'), LIMIT, 'the replayer paid');
    assert.equal(await writesConsumed(suite.gw(), `pk:${PAID}`), 1, 'the user did not');
    await othersServed('127.0.32.4');
  });

  it('a replay of an event the gateway never saw pays the replayer on the relay duplicate:', async () => {
    // Written to the relay directly: no claim at the gateway.
    const direct = await NostrClient.connect(suite.relay().url);
    const elsewhere = signedEvent(1, 'written past the gateway', paidSk);
    assert.equal((await direct.okFor(elsewhere.id, ['EVENT', elsewhere]))[2], true);
    direct.close();
    const before = await writesConsumed(suite.gw(), `pk:${PAID}`);

    const attacker = await open('127.0.32.5');
    for (let i = 0; i < 2; i++) {
      const ok = await send(attacker, elsewhere);
      assert.match(String(ok[3]), /^duplicate:/);
    }
    // The first went to the relay (its author charged, as for any first sight); its
    // duplicate: answer gave the author that charge back and charged the replayer; the
    // second was known and charged the replayer at once.
    const { gw } = suite;
    await waitFor(
      'the charge on the relay answer',
      async () => (await writesConsumed(gw(), 'ip:127.0.32.5')) >= 2,
    );
    assert.equal(await writesConsumed(gw(), 'ip:127.0.32.5'), 2);
    assert.equal(await writesConsumed(gw(), `pk:${PAID}`), before, 'the user paid nothing');
  });

  it('events claiming a listed pubkey with bad signatures are charged to the sender and close it', async () => {
    const before = await writesConsumed(suite.gw(), `pk:${PAID}`);
    const attacker = await open('127.0.32.6');
    const closed = new Promise<void>((resolve) => attacker.socket.once('close', () => resolve()));
    const answers = [];
    for (let i = 0; i < MAX_INVALID; i++) {
      const forged: Event = { ...signedEvent(1, `forged ${i}`, paidSk), sig: 'ab'.repeat(64) };
      answers.push(await send(attacker, forged));
    }
    for (const ok of answers) {
      assert.equal(ok[2], false);
      assert.match(String(ok[3]), /^invalid: event id or signature does not verify/);
    }
    await closed;
    assert.equal(await writesConsumed(suite.gw(), 'ip:127.0.32.6'), MAX_INVALID, 'the sender paid');
    assert.equal(await writesConsumed(suite.gw(), `pk:${PAID}`), before, 'the user did not');
    // That address verifies first no more this minute: a genuine event of the user from it
    // pays the address as any, and is served.
    const again = await open('127.0.32.6');
    const genuine = signedEvent(1, 'from a noisy address', paidSk);
    assert.equal((await send(again, genuine))[2], true);
    assert.equal(await writesConsumed(suite.gw(), 'ip:127.0.32.6'), MAX_INVALID + 1);
    await othersServed('127.0.32.7');
  });

  it('over POST /events: lifted for the listed key, a bad signature or a replay pays the sender', async () => {
    const url = `${suite.gw().url}/events`;
    const post = (event: Event, from: string) =>
      request(url, { method: 'POST', body: JSON.stringify(event), from });
    const before = await writesConsumed(suite.gw(), `pk:${PAID}`);
    const genuine = signedEvent(1, 'over HTTP', paidSk);
    assert.equal((await post(genuine, '127.0.32.8')).status, 200);
    assert.equal(await writesConsumed(suite.gw(), 'ip:127.0.32.8'), 0, 'lifted');
    const replayer = () => writesConsumed(suite.gw(), 'ip:127.0.32.9');
    // The claim is made once the relay's 2xx went out: replay until it is there.
    await waitFor('a replay charged to the replayer', async () => {
      assert.equal((await post(genuine, '127.0.32.9')).status, 200);
      return (await replayer()) >= 1;
    });
    const [paid, author] = [await replayer(), await writesConsumed(suite.gw(), `pk:${PAID}`)];
    assert.equal((await post(genuine, '127.0.32.9')).status, 200);
    assert.equal(await replayer(), paid + 1, 'each replay pays the replayer');
    const bad: Event = { ...signedEvent(1, 'forged over HTTP', paidSk), sig: 'cd'.repeat(64) };
    assert.equal((await post(bad, '127.0.32.10')).status, 400);
    assert.equal(await writesConsumed(suite.gw(), 'ip:127.0.32.10'), 1, 'the sender paid');
    assert.equal(await writesConsumed(suite.gw(), `pk:${PAID}`), author, 'never the user');
    assert.ok(author >= before + 1);
  });
});
