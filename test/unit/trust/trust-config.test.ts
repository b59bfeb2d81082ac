/**
 * nostr.trust's configuration: seeds as hex or npub (lowered), refused when they are not
 * keys, a tier that quotas.tiers must define, and an identity that can claim it; and the
 * policy gives the tier to a key of the set unless identity.pubkeyTiers lists it.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { npubEncode } from 'nostr-tools/nip19';
import { GatewayConfigSchema } from '../../../src/config/schema.js';
import { Policy } from '../../../src/quota/policy.js';
import { PubkeySet } from '../../../src/trust/pubkey-set.js';

const HEX = 'ab'.repeat(32);
const base = {
  upstreams: [{ id: 'a', url: 'http://127.0.0.1:7000' }],
  admin: { token: 'a-test-token-that-is-not-the-placeholder' },
  identity: { order: ['pubkey', 'ip'] },
  quotas: {
    tiers: {
      default: { write: { points: 5, windowSec: 60 } },
      followed: { write: { points: 50, windowSec: 60 } },
    },
  },
};
const parse = (trust: unknown, over: Record<string, unknown> = {}) =>
  GatewayConfigSchema.safeParse({ ...base, ...over, nostr: { trust } });

describe('nostr.trust configuration', { timeout: 30_000 }, () => {
  it('reads seeds as hex (any case) or npub, with the defaults', () => {
    const r = parse({ tier: 'followed', seeds: [HEX.toUpperCase(), npubEncode('cd'.repeat(32))] });
    assert.ok(r.success, JSON.stringify(r.error?.issues));
    const trust = r.data.nostr.trust!;
    assert.deepEqual(trust.seeds, [HEX, 'cd'.repeat(32)]);
    assert.equal(trust.hops, 2);
    assert.equal(trust.verifySignatures, true);
  });

  it('refuses a seed that is not a key, an unknown tier, and an identity that cannot claim it', () => {
    const bad = parse({ tier: 'followed', seeds: ['npub1nope'] });
    assert.ok(!bad.success && /npub/.test(JSON.stringify(bad.error.issues)));
    const unknown = parse({ tier: 'gold', seeds: [HEX] });
    assert.ok(
      !unknown.success && /names tier \\"gold\\"/.test(JSON.stringify(unknown.error.issues)),
    );
    const ipOnly = parse({ tier: 'followed', seeds: [HEX] }, { identity: { order: ['ip'] } });
    assert.ok(!ipOnly.success && /pubkey or auth/.test(JSON.stringify(ipOnly.error.issues)));
  });

  it('gives the tier to the set, a listed tier first, and keeps it across a reload', () => {
    const settings = GatewayConfigSchema.parse({
      ...base,
      quotas: {
        ...base.quotas,
        tiers: { ...base.quotas.tiers, paid: { write: { points: 9, windowSec: 60 } } },
      },
    }).quotas;
    const policy = new Policy(settings);
    policy.setPubkeyTiers(new Map([['cd'.repeat(32), 'paid']]));
    policy.setTrusted({ tier: 'followed', set: PubkeySet.of([HEX, 'cd'.repeat(32)]) });
    assert.equal(policy.tierOfPubkey(HEX), 'followed');
    assert.equal(policy.tierOfPubkey('cd'.repeat(32)), 'paid');
    assert.equal(policy.tierOfPubkey('ef'.repeat(32)), undefined);
    policy.reload(settings);
    assert.equal(policy.tierOfPubkey(HEX), 'followed');
  });
});
