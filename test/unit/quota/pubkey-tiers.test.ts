/**
 * identity.pubkeyTiers in process: the pubkey files (hex, npub, comments, bad lines, size),
 * the tier lookup, the configuration's checks, and the admission step's charges for a key in
 * a tier that lifts the address (scripted decider, in-memory claims).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { before, describe, it } from 'node:test';
import { npubEncode } from 'nostr-tools/nip19';
import { finalizeEvent, generateSecretKey, getPublicKey } from 'nostr-tools/pure';
import type { Event } from 'nostr-tools/pure';
import { loadGatewayConfig, validateGatewayConfig } from '../../../src/config/load.js';
import type { ConnectionFacts } from '../../../src/gateway/admission.js';
import { settleActions } from '../../helpers/settle.js';
import { initSignatureVerifier } from '../../../src/nostr/verify.js';
import { Policy } from '../../../src/quota/policy.js';
import {
  loadPubkeyTiers,
  parsePubkeyList,
  PubkeyListError,
  readBoundedText,
} from '../../../src/quota/pubkey-tiers.js';
import { admissionUnderTest } from '../../helpers/fake-admission-context.js';
import type { AdmissionUnderTest } from '../../helpers/fake-admission-context.js';
import { signedEvent } from '../../helpers/nostr-events.js';

const HEX = 'a'.repeat(64);
const sk = generateSecretKey();
const PK = getPublicKey(sk);

/** The npub with its last (checksum) character changed: never the same character. */
function brokenChecksum(npub: string): string {
  return npub.slice(0, -1) + (npub.endsWith('q') ? 'p' : 'q');
}

function tmpFile(name: string, text: string): string {
  const file = path.join(mkdtempSync(path.join(tmpdir(), 'sluice-pk-')), name);
  writeFileSync(file, text);
  return file;
}

describe('pubkey files', { timeout: 30_000 }, () => {
  it('reads hex (any case, lowered), npub, comments and blank lines', () => {
    const text = [
      '# paid members',
      '',
      HEX,
      `  ${'B'.repeat(64)}  # upper case, with a comment after it`,
      npubEncode(PK),
      '   ',
    ].join('\n');
    assert.deepEqual(parsePubkeyList(text, 'paid.txt'), [HEX, 'b'.repeat(64), PK]);
  });

  it('names the file and line of the first bad line', () => {
    const cases: [string, RegExp][] = [
      ['abc', /^paid\.txt:3: expected 64 hex digits or an npub \(got "abc"\)$/],
      [`${HEX}0`, /^paid\.txt:3: expected 64 hex digits/],
      [brokenChecksum(npubEncode(PK)), /^paid\.txt:3: not a valid npub/],
      [`nsec1${'q'.repeat(58)}`, /^paid\.txt:3: expected 64 hex digits or an npub/],
    ];
    for (const [bad, message] of cases) {
      assert.throws(
        () => parsePubkeyList(`${HEX}\n# ok\n${bad}\n${HEX}`, 'paid.txt'),
        (err: Error) => err instanceof PubkeyListError && message.test(err.message),
        bad,
      );
    }
  });

  it('refuses a file past the size bound, and a missing file, by name', () => {
    const big = tmpFile('big.txt', `${HEX}\n`.repeat(10));
    assert.throws(() => readBoundedText(big, 100), /big\.txt: 650 bytes, more than the 100/);
    assert.equal(readBoundedText(big, 650).length, 650);
    assert.throws(
      () => readBoundedText(`${big}.gone`),
      /big\.txt\.gone: cannot read it \(no such file\)/,
    );
  });

  it('maps every listed key to its tier; one key under two tiers is an error', () => {
    const files = { paid: 'paid.txt', invited: 'invited.txt' };
    const texts: Record<string, string> = {
      'paid.txt': `${HEX}\n${PK}`,
      'invited.txt': 'c'.repeat(64),
    };
    const map = loadPubkeyTiers(files, (f) => texts[f]!);
    assert.deepEqual(
      [...map],
      [
        [HEX, 'paid'],
        [PK, 'paid'],
        ['c'.repeat(64), 'invited'],
      ],
    );
    texts['invited.txt'] = HEX.toUpperCase();
    assert.throws(
      () => loadPubkeyTiers(files, (f) => texts[f]!),
      /^PubkeyListError: identity\.pubkeyTiers\.invited: pubkey a{64} of invited\.txt is in tier "paid"/,
    );
    texts['invited.txt'] = 'oops';
    assert.throws(
      () => loadPubkeyTiers(files, (f) => texts[f]!),
      /identity\.pubkeyTiers\.invited: invited\.txt:1: expected 64 hex digits/,
    );
  });
});

describe('pubkey tiers in the configuration and the policy', { timeout: 30_000 }, () => {
  const base = {
    admin: { token: 'pubkey-tiers-admin-token-0123' },
    upstreams: [{ id: 'relay-a', url: 'http://127.0.0.1:9' }],
  };

  it('refuses a tier that quotas.tiers does not define', () => {
    assert.throws(
      () => validateGatewayConfig({ ...base, identity: { pubkeyTiers: { paid: 'paid.txt' } } }),
      /identity\.pubkeyTiers\.paid: names tier "paid", which quotas\.tiers does not define \(tiers: default\)/,
    );
  });

  it("resolves the files against the configuration file's directory", () => {
    const file = tmpFile(
      'gateway.json',
      JSON.stringify({
        ...base,
        identity: { pubkeyTiers: { paid: 'members/paid.txt', abs: '/etc/abs.txt' } },
        quotas: {
          tiers: {
            default: { write: { points: 1, windowSec: 60 } },
            paid: { write: { points: 9, windowSec: 60 }, chargeAddress: false },
            abs: { write: { points: 9, windowSec: 60 } },
          },
        },
      }),
    );
    const config = loadGatewayConfig({ file, env: {} });
    assert.deepEqual(config.identity.pubkeyTiers, {
      paid: path.join(path.dirname(file), 'members/paid.txt'),
      abs: '/etc/abs.txt',
    });
    assert.equal(config.quotas.tiers.paid!.chargeAddress, false);
    assert.equal(config.quotas.tiers.abs!.chargeAddress, undefined, 'unset: the address pays');
  });

  it('looks a key up in its tier; only chargeAddress false lifts the address', () => {
    const config = validateGatewayConfig({
      ...base,
      quotas: {
        tiers: {
          default: { write: { points: 1, windowSec: 60 } },
          paid: { write: { points: 9, windowSec: 60 }, chargeAddress: false },
          invited: { write: { points: 5, windowSec: 60 } },
        },
      },
    });
    const policy = new Policy(config.quotas);
    policy.setPubkeyTiers(
      new Map([
        [HEX, 'paid'],
        [PK, 'invited'],
      ]),
    );
    assert.equal(policy.tierOfPubkey(HEX), 'paid');
    assert.equal(policy.tierOfPubkey(PK), 'invited');
    assert.equal(policy.tierOfPubkey('d'.repeat(64)), undefined);
    assert.equal(policy.liftsAddress(HEX), true);
    assert.equal(policy.liftsAddress(PK), false, 'chargeAddress unset: the address pays');
    assert.equal(policy.liftsAddress('d'.repeat(64)), false);
    // A reload of quotas keeps the keys (they are replaced only by their own files).
    policy.reload(config.quotas);
    assert.equal(policy.tierOfPubkey(HEX), 'paid');
  });
});

/** A connection's facts, its session made by the admission under test. */
function connection(under: AdmissionUnderTest, ip: string): ConnectionFacts {
  return { ip, nodeId: 'relay-a', session: under.admission.newSession() };
}

function eventFrame(event: Event): Buffer {
  return Buffer.from(JSON.stringify(['EVENT', event]));
}

/** The charges the scripted decider saw, as "source:raw" (pubkeys cut to 8 characters). */
function charged(under: AdmissionUnderTest): string[] {
  const list = under.decider.charges.map(
    (c) => `${c.source}:${c.raw.length === 64 ? c.raw.slice(0, 8) : c.raw}`,
  );
  under.decider.charges.length = 0;
  return list;
}

describe('charges of a key in a lifting tier (admission, in process)', { timeout: 30_000 }, () => {
  before(() => initSignatureVerifier());

  function under(verify: 'auto' | 'relay' = 'auto', order = ['apiKey', 'pubkey', 'ip']) {
    const u = admissionUnderTest(
      {
        identity: { order: order as never },
        nostr: { verify, maxInvalidEvents: 3, publicUrl: 'wss://relay.example.test' },
        quotas: {
          tiers: {
            default: { write: { points: 10, windowSec: 60 } },
            paid: { write: { points: 100, windowSec: 60 }, chargeAddress: false },
            invited: { write: { points: 50, windowSec: 60 } },
          },
          apiKeys: { 'key-of-test-0123': 'default' },
        },
      },
      ['allowed'],
    );
    u.ctx.policy.setPubkeyTiers(new Map([[PK, 'paid']]));
    return u;
  }
  const pk = `pubkey:${PK.slice(0, 8)}`;

  it('a lifted author pays its tier and not the address; others pay both', async () => {
    const u = under();
    const conn = connection(u, '192.0.2.1');
    const mine = signedEvent(1, 'paid member', sk);
    assert.equal((await u.admission.frame(conn, eventFrame(mine), false)).forward, true);
    assert.deepEqual(charged(u), [pk]);
    const other = signedEvent(1, 'stranger');
    assert.equal((await u.admission.frame(conn, eventFrame(other), false)).forward, true);
    assert.deepEqual(charged(u), ['ip:192.0.2.1', `pubkey:${other.pubkey.slice(0, 8)}`]);
  });

  it('an API key is charged as ever; an old event pays the address', async () => {
    const u = under();
    const conn = { ...connection(u, '192.0.2.2'), apiKey: 'key-of-test-0123' };
    await u.admission.frame(conn, eventFrame(signedEvent(1, 'with a key', sk)), false);
    assert.deepEqual(charged(u), ['apiKey:key-of-test-0123', pk]);
    const plain = connection(u, '192.0.2.2');
    const old = finalizeEvent(
      { kind: 1, created_at: Math.floor(Date.now() / 1000) - 120, tags: [], content: 'old' },
      sk,
    );
    assert.equal((await u.admission.frame(plain, eventFrame(old), false)).forward, true);
    assert.deepEqual(charged(u), ['ip:192.0.2.2', pk], 'older than the window: not lifted');
  });

  it('a bad signature claiming a lifted key is charged to the address and closes at the bound', async () => {
    const u = under();
    const conn = connection(u, '192.0.2.3');
    const forged = { ...signedEvent(1, 'forged'), pubkey: PK };
    const bad = { ...signedEvent(1, 'bad sig', sk), sig: signedEvent(1, 'x').sig };
    const verdicts = [];
    for (const event of [forged, bad, bad]) {
      verdicts.push(await u.admission.frame(conn, eventFrame(event), false));
    }
    assert.ok(verdicts.every((v) => !v.forward && v.reply?.[2] === false));
    assert.match(String(verdicts[0]!.reply![3]), /^invalid: event id or signature/);
    assert.deepEqual(charged(u), ['ip:192.0.2.3', 'ip:192.0.2.3', 'ip:192.0.2.3']);
    assert.equal(verdicts[2]!.close?.code, 1008, 'closed at nostr.maxInvalidEvents');
    // That address verifies first no more this minute: its lifted events pay it first.
    const next = connection(u, '192.0.2.3');
    await u.admission.frame(next, eventFrame(signedEvent(1, 'genuine', sk)), false);
    assert.deepEqual(charged(u), ['ip:192.0.2.3', pk]);
    // Another address is not affected.
    await u.admission.frame(connection(u, '192.0.2.4'), eventFrame(signedEvent(1, 'g', sk)), false);
    assert.deepEqual(charged(u), [pk]);
  });

  it('a replay of a claimed event is charged to the sender, not the author', async () => {
    const u = under();
    const conn = connection(u, '192.0.2.5');
    const mine = signedEvent(1, 'claimed', sk);
    await u.admission.frame(conn, eventFrame(mine), false);
    await settleActions(
      conn.session,
      conn.session.relay(Buffer.from(JSON.stringify(['OK', mine.id, true, '']))),
    );
    assert.deepEqual(charged(u), [pk]);
    const replayer = connection(u, '192.0.2.6');
    const verdict = await u.admission.frame(replayer, eventFrame(mine), false);
    assert.deepEqual(verdict.reply, ['OK', mine.id, true, 'duplicate: already have this event']);
    assert.deepEqual(charged(u), ['ip:192.0.2.6']);
  });

  it("a relay's duplicate: answer to a lifted event charges the address after the fact", async () => {
    for (const verify of ['auto', 'relay'] as const) {
      const u = under(verify);
      const conn = connection(u, '192.0.2.7');
      const mine = signedEvent(1, `unclaimed ${verify}`, sk);
      assert.equal((await u.admission.frame(conn, eventFrame(mine), false)).forward, true);
      const dup = ['OK', mine.id, true, 'duplicate: already have this event'];
      const done = await settleActions(
        conn.session,
        conn.session.relay(Buffer.from(JSON.stringify(dup))),
      );
      assert.deepEqual(
        done.map((step) => step.replace(/ shared=.*/, '')),
        verify === 'relay' ? ['charge-sender'] : ['refund-author', 'charge-sender', 'claim'],
      );
      // The replayer pays, the author does not: under relay it is charged on a fresh OK only,
      // under auto its charge (made before forwarding) is given back.
      assert.deepEqual(charged(u), verify === 'relay' ? ['ip:192.0.2.7'] : [pk, 'ip:192.0.2.7']);
      assert.deepEqual(
        u.decider.refunds.map(
          (c) => `${c.source}:${c.raw.length === 64 ? c.raw.slice(0, 8) : c.raw}`,
        ),
        verify === 'relay' ? [] : [pk],
      );
    }
  });

  it('verify: relay lifts only after the gateway checked the signature', async () => {
    const u = under('relay');
    const conn = connection(u, '192.0.2.8');
    const bad = { ...signedEvent(1, 'bad sig', sk), sig: signedEvent(1, 'x').sig };
    const verdict = await u.admission.frame(conn, eventFrame(bad), false);
    assert.equal(verdict.forward, false, 'refused by the gateway, never forwarded');
    assert.deepEqual(charged(u), ['ip:192.0.2.8']);
    const good = signedEvent(1, 'good', sk);
    assert.equal((await u.admission.frame(conn, eventFrame(good), false)).forward, true);
    assert.deepEqual(charged(u), [], 'nothing before the relay OK: not even the address');
    await settleActions(
      conn.session,
      conn.session.relay(Buffer.from(JSON.stringify(['OK', good.id, true, '']))),
    );
    assert.deepEqual(charged(u), [pk]);
  });

  it("an AUTH key in a lifting tier replaces the address as the connection's sender", () => {
    const u = under('auto', ['auth', 'pubkey', 'ip']);
    const withKey = (pubkey: string, apiKey?: string) =>
      ({ ip: '192.0.2.9', apiKey, nodeId: 'relay-a', session: { authPubkey: pubkey } }) as never;
    const sources = (conn: never) => u.admission.senders(conn).map((i) => `${i.source}/${i.tier}`);
    assert.deepEqual(sources(withKey(PK)), ['auth/paid']);
    assert.deepEqual(sources(withKey(HEX)), ['ip/default', 'auth/default'], 'not listed');
    u.ctx.policy.setPubkeyTiers(
      new Map([
        [PK, 'paid'],
        [HEX, 'invited'],
      ]),
    );
    assert.deepEqual(sources(withKey(HEX)), ['ip/default', 'auth/invited'], 'a tier, no lift');
  });
});
