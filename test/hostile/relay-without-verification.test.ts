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
import { startGateway, writesConsumed } from '../helpers/gateway.js';
import type { GatewayUnderTest } from '../helpers/gateway.js';
import { forgeriesOf, pubkeyQuotas, sendFrom, victimKeys } from '../helpers/hash-path.js';
import { relayHas } from '../helpers/nostr-events.js';
import { startRelay } from '../helpers/processes.js';
import type { RelayProcess } from '../helpers/processes.js';
import type { RawNostr } from '../helpers/raw-nostr.js';

const LIMIT = 10;

describe('a relay that does not verify signatures', { timeout: 90_000 }, () => {
  let relay: RelayProcess;
  let auto: GatewayUnderTest;
  let always: GatewayUnderTest;
  const sockets: RawNostr[] = [];

  before(async () => {
    relay = await startRelay({ nodeId: 'relay-a', extraArgs: ['--no-verify-signatures'] });
    // One Valkey count for both gateways.
    const settings = (verify: 'auto' | 'always') =>
      pubkeyQuotas(`noverify${process.pid}`, LIMIT, { verify });
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

  /** A forgery in a fresh victim's name, sent through `gw` from `from`. */
  async function forge(gw: GatewayUnderTest, from: string) {
    const { pk, event } = victimKeys();
    const forged = forgeriesOf(event, 1)[0]!;
    const forger = await sendFrom(gw, from, forged, sockets);
    return { pk, forged, ok: await forger.okFor(forged.id) };
  }

  it('under auto, a forgery in an unknown author name is stored and charged to the victim', async () => {
    const { pk, forged, ok } = await forge(auto, '127.0.24.10');
    // Charged on its hash, forwarded; the relay does not check and stores it.
    assert.deepEqual(ok.slice(0, 3), ['OK', forged.id, true]);
    assert.equal(await relayHas(relay.url, forged.id), true, 'the forgery is stored');
    assert.equal(await writesConsumed(auto, `pk:${pk}`), 1, 'and charged to its victim');
    assert.equal(await writesConsumed(auto, 'ip:127.0.24.10'), 1, 'the forger paid too');
  });

  it('under always, the same forgery is refused: the victim pays nothing, nothing is stored', async () => {
    const { pk, forged, ok } = await forge(always, '127.0.24.11');
    assert.equal(ok[2], false);
    assert.match(String(ok[3]), /^invalid:/);
    assert.equal(await relayHas(relay.url, forged.id), false, 'nothing stored');
    assert.equal(await writesConsumed(always, `pk:${pk}`), 0, 'the victim paid nothing');
    assert.equal(await writesConsumed(always, 'ip:127.0.24.11'), 1, 'the forger paid');
  });
});
