/**
 * identity.pubkeyTiers through a real gateway process, the reference relay and Valkey: a
 * listed key is charged by its tier (as an AUTH identity and as a verified author), a tier
 * with chargeAddress false leaves the address's counter alone, an unlisted key still pays
 * the address, and SIGHUP rereads the files (a bad one keeps the running set).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { makeAuthEvent } from 'nostr-tools/nip42';
import { npubEncode } from 'nostr-tools/nip19';
import { finalizeEvent, generateSecretKey, getPublicKey } from 'nostr-tools/pure';
import { admin, writesConsumed } from '../helpers/gateway.js';
import type { GatewayUnderTest, NostrClient } from '../helpers/gateway.js';
import { signedEvent } from '../helpers/nostr-events.js';
import { nostrSuite } from '../helpers/nostr-suite.js';
import { waitFor } from '../helpers/raw-socket.js';

const PUBLIC_URL = 'wss://relay.example.test';
const DEFAULT_LIMIT = 3;
const PAID_LIMIT = 8;
const INVITED_LIMIT = 5;

const paidSk = generateSecretKey();
const PAID = getPublicKey(paidSk);
const invitedSk = generateSecretKey();
const INVITED = getPublicKey(invitedSk);
const movedSk = generateSecretKey();
const MOVED = getPublicKey(movedSk);

const dir = mkdtempSync(path.join(tmpdir(), 'sluice-tiers-'));
const paidFile = path.join(dir, 'paid.txt');
const invitedFile = path.join(dir, 'invited.txt');
writeFileSync(paidFile, `# paid members\n${PAID.toUpperCase()}\n`);
writeFileSync(invitedFile, `${npubEncode(INVITED)} # invited by the operator\n`);

/** The tier the admin endpoint says a client identity is charged in. */
async function tierOf(gw: GatewayUnderTest, client: string): Promise<string> {
  return (JSON.parse((await admin(gw, 'GET', `/admin/clients/${client}`)).body) as { tier: string })
    .tier;
}

/** `count` events by `sk` (fresh ones by strangers when absent): how many were accepted. */
async function write(client: NostrClient, count: number, sk?: Uint8Array): Promise<number> {
  let accepted = 0;
  for (let i = 0; i < count; i++) {
    const e = signedEvent(1, `write ${i} ${Math.random()}`, sk);
    if ((await client.okFor(e.id, ['EVENT', e]))[2] === true) accepted++;
  }
  return accepted;
}

async function authenticate(client: NostrClient, sk: Uint8Array): Promise<void> {
  await client.until((m) => m.some((x) => x[0] === 'AUTH'));
  const challenge = String(client.received.find((x) => x[0] === 'AUTH')![1]);
  const auth = finalizeEvent(makeAuthEvent(PUBLIC_URL, challenge), sk);
  assert.equal((await client.okFor(auth.id, ['AUTH', auth]))[2], true);
}

describe('pubkey tiers through the gateway', { timeout: 120_000 }, () => {
  const suite = nostrSuite({
    client: 'iovalkey',
    mode: 'standalone',
    limit: DEFAULT_LIMIT,
    relayArgs: ['--public-url', `${PUBLIC_URL}/`],
    settings: {
      identity: {
        order: ['auth', 'pubkey', 'ip'],
        pubkeyTiers: { paid: paidFile, invited: invitedFile },
      },
      nostr: { publicUrl: PUBLIC_URL },
      quotas: {
        keyPrefix: `tiers${Date.now().toString(36)}`,
        tiers: {
          default: { write: { points: DEFAULT_LIMIT, windowSec: 60 } },
          paid: { write: { points: PAID_LIMIT, windowSec: 60 }, chargeAddress: false },
          invited: { write: { points: INVITED_LIMIT, windowSec: 60 } },
        },
      },
    },
  });

  it("a verified author in a lifting tier gets its tier's quota; the address is untouched", async () => {
    const client = await suite.connect('127.0.31.2');
    assert.equal(await write(client, PAID_LIMIT + 2, paidSk), PAID_LIMIT);
    assert.equal(await writesConsumed(suite.gw(), `pk:${PAID}`), PAID_LIMIT);
    assert.equal(await tierOf(suite.gw(), `pk:${PAID}`), 'paid');
    assert.equal(await writesConsumed(suite.gw(), 'ip:127.0.31.2'), 0, 'the address never paid');
    // The same address is served for anyone else, with its whole default quota.
    assert.equal(await write(client, 1), 1);
    assert.equal(await writesConsumed(suite.gw(), 'ip:127.0.31.2'), 1);
  });

  it('a key in a tier that does not lift (npub line) pays its tier and the address', async () => {
    const client = await suite.connect('127.0.31.3');
    assert.equal(await write(client, 2, invitedSk), 2);
    assert.equal(await tierOf(suite.gw(), `pk:${INVITED}`), 'invited');
    assert.equal(await writesConsumed(suite.gw(), `pk:${INVITED}`), 2);
    assert.equal(await writesConsumed(suite.gw(), 'ip:127.0.31.3'), 2, 'the address paid too');
  });

  it('a key not in any file pays the default tier and the address', async () => {
    const client = await suite.connect('127.0.31.4');
    const sk = generateSecretKey();
    assert.equal(await write(client, DEFAULT_LIMIT + 1, sk), DEFAULT_LIMIT);
    assert.equal(await tierOf(suite.gw(), `pk:${getPublicKey(sk)}`), 'default');
    assert.equal(await writesConsumed(suite.gw(), 'ip:127.0.31.4'), DEFAULT_LIMIT);
  });

  it("an AUTH key in a lifting tier is the connection's sender, instead of its address", async () => {
    const client = await suite.connect('127.0.31.5');
    await authenticate(client, paidSk);
    // Events by strangers: each pays its author and the AUTH key, never the address.
    assert.equal(await write(client, DEFAULT_LIMIT + 1), DEFAULT_LIMIT + 1);
    assert.equal(await writesConsumed(suite.gw(), `auth:${PAID}`), DEFAULT_LIMIT + 1);
    assert.equal(await tierOf(suite.gw(), `auth:${PAID}`), 'paid');
    assert.equal(await writesConsumed(suite.gw(), 'ip:127.0.31.5'), 0);
    // An unlisted AUTH key adds its charge to the address's, as ever.
    const other = await suite.connect('127.0.31.5');
    await authenticate(other, generateSecretKey());
    assert.equal(await write(other, 1), 1);
    assert.equal(await writesConsumed(suite.gw(), 'ip:127.0.31.5'), 1);
  });

  it('SIGHUP rereads the files: a key moves to a tier; a bad file keeps the running set', async () => {
    const gw = suite.gw();
    const client = await suite.connect('127.0.31.6');
    assert.equal(await write(client, 1, movedSk), 1);
    assert.equal(await writesConsumed(gw, 'ip:127.0.31.6'), 1, 'unlisted: the address pays');

    writeFileSync(paidFile, `${PAID}\n${MOVED}\n`);
    process.kill(gw.proc.pid, 'SIGHUP');
    await waitFor(
      'the moved key in tier paid',
      async () => (await tierOf(gw, `pk:${MOVED}`)) === 'paid',
    );
    assert.equal(await write(client, 2, movedSk), 2);
    assert.equal(await writesConsumed(gw, 'ip:127.0.31.6'), 1, 'listed now: the address is spared');

    writeFileSync(paidFile, `${PAID}\nnot a pubkey\n`);
    process.kill(gw.proc.pid, 'SIGHUP');
    await waitFor('the reload refused', () =>
      /reload rejected \(identity\.pubkeyTiers\.paid: .*paid\.txt:2: expected 64 hex digits/.test(
        gw.proc.output(),
      ),
    );
    assert.equal(await tierOf(gw, `pk:${MOVED}`), 'paid', 'the running set stays');
    assert.equal(await write(client, 1, movedSk), 1);
    assert.equal(await writesConsumed(gw, 'ip:127.0.31.6'), 1);
    writeFileSync(paidFile, `${PAID}\n`);
  });
});
