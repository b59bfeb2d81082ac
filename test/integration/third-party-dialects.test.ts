/**
 * How each third-party relay answers what the gateway reads of it (see docs/NOSTR.md, "Relay
 * compatibility"): a forged signature, one it cannot parse, a bad id, a repeat of a stored
 * event, the NIP-11 document; and what follows through the gateway where they differ: a
 * repeat that khatru answers `OK true ""` (no `duplicate:`) is charged to its author as
 * stored, where nostr-rs-relay's `duplicate:` gives the charge back. Each relay's tests skip,
 * with the reason, where it is not built.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { finalizeEvent, generateSecretKey, getPublicKey } from 'nostr-tools/pure';
import type { ThirdPartyImpl } from '../../src/bench/run/config.js';
import { writesConsumedReach } from '../helpers/gateway.js';
import { relayBehindGateway, relaysUnderSuite } from '../helpers/third-party-relays.js';

/** What each relay answers; a RegExp for the OK's message. */
const DIALECT: Record<ThirdPartyImpl, { repeat: RegExp; unparsable: RegExp }> = {
  'nostr-rs-relay': { repeat: /^duplicate:/, unparsable: /^invalid: / },
  khatru: { repeat: /^$/, unparsable: /^error: failed to verify signature$/ },
};

const note = (content: string, sk = generateSecretKey()) =>
  finalizeEvent({ kind: 1, created_at: Math.floor(Date.now() / 1000), tags: [], content }, sk);

for (const suite of relaysUnderSuite()) {
  const dialect = DIALECT[suite.impl];

  describe(`${suite.impl}: what it answers`, { timeout: 60_000, skip: suite.skip }, () => {
    const setup = relayBehindGateway(suite, { identity: { order: ['pubkey', 'ip'] } });

    it('refuses forgeries and bad ids, and says how it takes a repeat', async () => {
      const event = note(`dialect ${suite.impl}`);
      const direct = await setup.connectDirect();
      assert.deepEqual(await direct.okFor(event.id, ['EVENT', event]), ['OK', event.id, true, '']);
      const again = await setup.connectDirect();
      const repeat = await again.okFor(event.id, ['EVENT', event]);
      assert.equal(repeat[2], true, JSON.stringify(repeat));
      assert.match(String(repeat[3]), dialect.repeat);

      const forged = { ...note('forged'), sig: event.sig };
      const refused = await direct.okFor(forged.id, ['EVENT', forged]);
      assert.equal(refused[2], false);
      assert.match(String(refused[3]), /^invalid: /);

      const unparsable = { ...note('unparsable'), sig: 'f'.repeat(128) };
      const answer = await direct.okFor(unparsable.id, ['EVENT', unparsable]);
      assert.equal(answer[2], false);
      assert.match(String(answer[3]), dialect.unparsable);

      const badId = { ...note('bad id'), content: 'changed' };
      const bad = await direct.okFor(badId.id, ['EVENT', badId]);
      assert.equal(bad[2], false);
      assert.match(String(bad[3]), /^invalid: /);
    });

    it('serves NIP-11, and the gateway merges it', async () => {
      const res = await fetch(`${setup.relay().url}/`, {
        headers: { accept: 'application/nostr+json' },
      });
      assert.equal(res.status, 200);
      const doc = (await res.json()) as { name?: string; supported_nips?: number[] };
      assert.match(String(doc.name), /sluice/);
      assert.ok(doc.supported_nips?.includes(11));
      const through = await fetch(`${setup.gw().url}/`, {
        headers: { accept: 'application/nostr+json' },
      });
      assert.equal(through.status, 200);
      const merged = (await through.json()) as { name?: string; sluice_write_quota?: unknown };
      assert.equal(merged.name, doc.name);
      assert.ok(merged.sluice_write_quota, JSON.stringify(merged));
    });

    it('a repeat of an event the relay had: its author pays as the answer says', async () => {
      const sk = generateSecretKey();
      const stored = note('stored before the gateway saw it', sk);
      await (await setup.connectDirect()).okFor(stored.id, ['EVENT', stored]);
      const client = await setup.connect('127.0.23.1');
      const ok = await client.okFor(stored.id, ['EVENT', stored]);
      assert.equal(ok[2], true, JSON.stringify(ok));
      assert.match(String(ok[3]), dialect.repeat, 'the relay answer reaches the client as is');
      // nostr-rs-relay's duplicate: gives the author's charge back; khatru's OK true "" is
      // a stored event to the gateway, and charged.
      const due = suite.impl === 'khatru' ? 1 : 0;
      assert.equal(await writesConsumedReach(setup.gw(), `pk:${getPublicKey(sk)}`, due), due);
    });
  });
}
