/**
 * Attack (issue 32): a forgery (right id, wrong signature) in the name of an author unknown
 * to the gateway, sent to a gateway in front of a relay that does not verify signatures
 * (`sluice relay --no-verify-signatures`). `nostr.verify: auto` charges an unknown author on
 * the hash and leaves the signature to the relay: it assumes a relay that verifies. The
 * honest result in front of one that does not: the forgery is stored, and charged to its
 * victim's pubkey. `nostr.verify: always` verifies before charging: the forgery is refused,
 * the victim pays nothing, nothing is stored.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { finalizeEvent, generateSecretKey, getPublicKey } from 'nostr-tools/pure';
import type { Event } from 'nostr-tools/pure';
import { startGateway, writesConsumed } from '../helpers/gateway.js';
import type { GatewayUnderTest } from '../helpers/gateway.js';
import { relayHas } from '../helpers/nostr-events.js';
import { startRelay } from '../helpers/processes.js';
import type { RelayProcess } from '../helpers/processes.js';
import { RawNostr } from '../helpers/raw-nostr.js';

const LIMIT = 10;

function forgery(victimSk: Uint8Array, content: string): Event {
  const other = finalizeEvent(
    { kind: 1, created_at: 1, tags: [], content: 'x' },
    generateSecretKey(),
  );
  const event = finalizeEvent(
    { kind: 1, created_at: Math.floor(Date.now() / 1000), tags: [], content },
    victimSk,
  );
  return { ...event, sig: other.sig };
}

describe('a relay that does not verify signatures', { timeout: 90_000 }, () => {
  let relay: RelayProcess;
  let auto: GatewayUnderTest;
  let always: GatewayUnderTest;
  const sockets: RawNostr[] = [];

  before(async () => {
    relay = await startRelay({ nodeId: 'relay-a', extraArgs: ['--no-verify-signatures'] });
    const settings = (verify: 'auto' | 'always') => ({
      identity: { order: ['pubkey', 'ip'] },
      quotas: {
        // One Valkey count for both gateways.
        keyPrefix: `noverify${process.pid}`,
        lease: { enabled: false },
        tiers: { default: { write: { points: LIMIT, windowSec: 60 } } },
      },
      nostr: { verify },
    });
    const upstreams = [{ id: 'relay-a', url: relay.url }];
    [auto, always] = await Promise.all([
      startGateway('iovalkey', 'standalone', upstreams, settings('auto')),
      startGateway('iovalkey', 'standalone', upstreams, settings('always')),
    ]);
  });

  after(async () => {
    for (const s of sockets) s.close();
    await Promise.allSettled([auto?.proc.stop(), always?.proc.stop()]);
    await relay?.stop();
  });

  it('under auto, a forgery in an unknown author name is stored and charged to the victim', async () => {
    const sk = generateSecretKey();
    const pk = getPublicKey(sk);
    const forger = await RawNostr.open(auto.url, '127.0.24.10');
    sockets.push(forger);
    const forged = forgery(sk, 'forged through auto');
    forger.send(['EVENT', forged]);
    // Charged on its hash, forwarded; the relay does not check and stores it.
    assert.deepEqual((await forger.okFor(forged.id)).slice(0, 3), ['OK', forged.id, true]);
    assert.equal(await relayHas(relay.url, forged.id), true, 'the forgery is stored');
    assert.equal(await writesConsumed(auto, `pk:${pk}`), 1, 'and charged to its victim');
    assert.equal(await writesConsumed(auto, 'ip:127.0.24.10'), 1, 'the forger paid too');
  });

  it('under always, the same forgery is refused: the victim pays nothing, nothing is stored', async () => {
    const sk = generateSecretKey();
    const pk = getPublicKey(sk);
    const forger = await RawNostr.open(always.url, '127.0.24.11');
    sockets.push(forger);
    const forged = forgery(sk, 'forged through always');
    forger.send(['EVENT', forged]);
    const ok = await forger.okFor(forged.id);
    assert.equal(ok[2], false);
    assert.match(String(ok[3]), /^invalid:/);
    assert.equal(await relayHas(relay.url, forged.id), false, 'nothing stored');
    assert.equal(await writesConsumed(always, `pk:${pk}`), 0, 'the victim paid nothing');
    assert.equal(await writesConsumed(always, 'ip:127.0.24.11'), 1, 'the forger paid');
  });
});
