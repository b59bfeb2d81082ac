/**
 * Attack (issue 32): forgeries in a known author's name (right id, wrong signature), one on
 * each of 12 connections from 12 addresses, sent at once while the relay does not answer.
 * Each is judged on its hash against the author's headroom; concurrent ones must not all read
 * the headroom before any charge updates it. What they can hold of the victim's quota at once
 * is its remaining points less the margin, and its own next event still goes in.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { finalizeEvent, generateSecretKey, getPublicKey } from 'nostr-tools/pure';
import type { Event } from 'nostr-tools/pure';
import { NostrClient, admin, request, startGateway, writesConsumed } from '../helpers/gateway.js';
import type { GatewayUnderTest } from '../helpers/gateway.js';
import { relayHas } from '../helpers/nostr-events.js';
import { startRelay } from '../helpers/processes.js';
import type { RelayProcess } from '../helpers/processes.js';
import { RecordingUpstream } from '../helpers/recording-upstream.js';
import { waitFor } from '../helpers/raw-socket.js';

const LIMIT = 8;
/** The headroom's margin under a limit of 8: a quarter (src/quota/headroom.ts). */
const MARGIN = 2;

describe('forgeries from many connections at once, the relay silent', { timeout: 90_000 }, () => {
  // The stand-in relay echoes what it gets: an echoed EVENT is no OK, so nothing is answered.
  let relay: RecordingUpstream;
  let gw: GatewayUnderTest;
  const clients: NostrClient[] = [];

  before(async () => {
    relay = await RecordingUpstream.start();
    gw = await startGateway('iovalkey', 'standalone', [{ id: 'relay-a', url: relay.url }], {
      identity: { order: ['pubkey', 'ip'] },
      quotas: {
        keyPrefix: `concurrent${Date.now().toString(36)}`,
        lease: { enabled: false },
        tiers: { default: { write: { points: LIMIT, windowSec: 60 } } },
      },
      nostr: { maxInvalidEvents: 1000 },
    });
  });

  after(async () => {
    for (const c of clients) c.close();
    await gw?.proc.stop();
    await relay?.close();
  });

  it('hold at most the remaining points less the margin; the victim still writes', async () => {
    const sk = generateSecretKey();
    const pk = getPublicKey(sk);
    const event = (content: string): Event =>
      finalizeEvent({ kind: 1, created_at: Math.floor(Date.now() / 1000), tags: [], content }, sk);
    const paid = async () => {
      const usage = JSON.parse((await admin(gw, 'GET', `/admin/clients/pk:${pk}`)).body) as {
        write: { consumed: number };
      };
      return usage.write.consumed;
    };
    // The victim writes once: verified, charged, known with 7 of 8 left.
    const victim = await NostrClient.connect(gw.url, '127.0.13.1');
    clients.push(victim);
    victim.send(['EVENT', event('mine')]);
    await waitFor('the victim charged once', async () => (await paid()) === 1, 10_000);

    const other = finalizeEvent(
      { kind: 1, created_at: 1, tags: [], content: 'x' },
      generateSecretKey(),
    );
    const attackers = await Promise.all(
      Array.from({ length: 12 }, (_, i) => NostrClient.connect(gw.url, `127.0.13.${i + 10}`)),
    );
    clients.push(...attackers);
    const forgeries = attackers.map((_, i) => ({ ...event(`forged ${i}`), sig: other.sig }));
    attackers.forEach((a, i) => a.send(['EVENT', forgeries[i]]));
    // Each is refused (verified: invalid) or forwarded on its hash (the relay stays silent):
    // wait until the victim's counter has settled on what the forgeries took.
    const refusedOf = () =>
      attackers.filter((a) => a.received.some((m) => m[0] === 'OK' && m[2] === false)).length;
    await waitFor(
      'every forgery judged',
      async () => refusedOf() + ((await paid()) - 1) === attackers.length,
      15_000,
    );
    const held = (await paid()) - 1;
    assert.ok(held > 0, 'some were judged on the hash (the attack is real)');
    assert.ok(held <= LIMIT - 1 - MARGIN, `${held} forgeries hold the victim's points at once`);

    // The victim's own next event is charged, not refused.
    const next = event('mine again');
    victim.send(['EVENT', next]);
    await waitFor('the victim charged again', async () => (await paid()) === held + 2, 10_000);
    assert.ok(
      !victim.received.some((m) => m[0] === 'OK' && m[1] === next.id && m[2] === false),
      'the victim was not refused',
    );
  });
});

/**
 * The same attack over HTTP (issue 31 put POSTed events on the hash path): forgeries POSTed
 * in a known author's name, concurrently, from many addresses, to a relay that verifies. The
 * relay's `invalid:` refusal gives each back; the forgers' addresses pay; nothing is stored.
 */
describe(
  "forgeries POSTed in a known author's name, the relay verifying",
  { timeout: 90_000 },
  () => {
    let relay: RelayProcess;
    let gw: GatewayUnderTest;

    before(async () => {
      relay = await startRelay({ nodeId: 'relay-a' });
      gw = await startGateway('iovalkey', 'standalone', [{ id: 'relay-a', url: relay.url }], {
        identity: { order: ['pubkey', 'ip'] },
        quotas: {
          keyPrefix: `postforged${Date.now().toString(36)}`,
          // Without leases the author's headroom is the counter's own: forgeries go on the hash.
          lease: { enabled: false },
          tiers: { default: { write: { points: LIMIT, windowSec: 60 } } },
        },
      });
    });

    after(async () => {
      await gw?.proc.stop();
      await relay?.stop();
    });

    it('the author ends paying only for what it signed; each forger pays; none is stored', async () => {
      const sk = generateSecretKey();
      const pk = getPublicKey(sk);
      const event = (content: string): Event =>
        finalizeEvent(
          { kind: 1, created_at: Math.floor(Date.now() / 1000), tags: [], content },
          sk,
        );
      const post = (e: Event, from: string) =>
        request(`${gw.url}/events`, { method: 'POST', body: JSON.stringify(e), from });
      const mine = event('mine');
      assert.equal((await post(mine, '127.0.14.1')).status, 200);
      assert.equal(await writesConsumed(gw, `pk:${pk}`), 1);

      const other = finalizeEvent(
        { kind: 1, created_at: 1, tags: [], content: 'x' },
        generateSecretKey(),
      );
      const forgeries = Array.from({ length: 8 }, (_, i) => ({
        ...event(`forged ${i}`),
        sig: other.sig,
      }));
      const answers = await Promise.all(forgeries.map((f, i) => post(f, `127.0.14.${i + 10}`)));
      for (const a of answers) {
        assert.equal(a.status, 400, a.body);
        assert.match(a.body, /invalid/);
      }
      // Charged on the hash or verified first: either way the author is given back in the end.
      await waitFor(
        'the author given back',
        async () => (await writesConsumed(gw, `pk:${pk}`)) === 1,
      );
      for (let i = 0; i < forgeries.length; i++) {
        assert.equal(await writesConsumed(gw, `ip:127.0.14.${i + 10}`), 1, 'the forger paid');
        assert.equal(await relayHas(relay.url, forgeries[i]!.id), false);
      }
      // The author's own next event goes in.
      assert.equal((await post(event('mine again'), '127.0.14.1')).status, 200);
    });
  },
);
