/**
 * Attack (issue 32): forgeries (right id, wrong signature) in the name of an author this
 * gateway has not charged in its window, sent at once over raw sockets from many
 * connections on many addresses, while the relay answers slowly, or closes its socket with
 * them awaited. Under `nostr.verify: auto` an unknown author is charged on the event's hash
 * alone, one write at a time (Headroom.reserve): the writes that come while that one is in
 * its checks are verified first, so the forgers hold at most one of the victim's points a
 * gateway process (with a limit of 2, the margin leaves no more once the first is counted),
 * until the relay's answer, or its loss, gives it back.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Event } from 'nostr-tools/pure';
import { metricValue, request, startGateway, writesConsumed } from '../helpers/gateway.js';
import type { GatewayUnderTest } from '../helpers/gateway.js';
import {
  answered,
  forgeriesOf,
  pubkeyQuotas,
  suiteRelayBehindProxy,
  victimKeys,
} from '../helpers/hash-path.js';
import { relayHas } from '../helpers/nostr-events.js';
import { RawNostr } from '../helpers/raw-nostr.js';
import { waitFor } from '../helpers/raw-socket.js';

/** A limit of 2 keeps a margin of 1 (a quarter, at least one): one write on the hash at most. */
const LIMIT = 2;
/** Forgers, each on its own connection from its own loopback address. */
const FORGERS = 16;
/** Forgers that come once the first forgery's charge is counted. */
const LATE_FORGERS = 8;

/** Forgeries the reference relay turned away for their signature, from its /stats. */
async function badSignatures(relayUrl: string): Promise<number> {
  const res = await request(`${relayUrl}/stats`);
  assert.equal(res.status, 200, res.body);
  return (JSON.parse(res.body) as { eventsRejected: { bad_signature: number } }).eventsRejected
    .bad_signature;
}

// Leases off (Valkey's count is the charge), and the shipped leases with credit for a first
// write: the forgery charged on the hash is then admitted on credit, its take sent after.
for (const leases of [false, true]) {
  describe(
    `forgeries in an unknown author name from many addresses at once, the relay slow or closing${leases ? ' (leases, credit)' : ''}`,
    { timeout: 180_000 },
    () => {
      const { sockets, ...suite } = suiteRelayBehindProxy();
      let gw: GatewayUnderTest;

      before(async () => {
        gw = await startGateway(
          'iovalkey',
          'standalone',
          [{ id: 'relay-a', url: suite.proxy().url }],
          pubkeyQuotas(
            `unknownforged${leases ? 'l' : ''}${Date.now().toString(36)}`,
            LIMIT,
            { maxInvalidEvents: 1000 },
            leases,
          ),
        );
      });

      after(async () => {
        await gw?.proc.stop();
      });

      /**
       * Open a raw connection from each forger's address, then send every forgery as fast as
       * the loop writes them, and wait until each is either refused by the gateway or charged
       * to the victim and forwarded (held at the proxy): returns the forwarded ones. `held`: the
       * victim's points held before.
       */
      async function sendAtOnce(forgeries: Event[], subnet: string, pk: string, held = 0) {
        const forgers = await Promise.all(
          forgeries.map((_, i) => RawNostr.open(gw.url, `127.0.${subnet}.${i + 10}`)),
        );
        sockets.push(...forgers);
        forgers.forEach((f, i) => f.send(['EVENT', forgeries[i]]));
        const refusedHere = () => forgers.filter((f, i) => answered(f, forgeries[i]!.id)).length;
        await waitFor(
          'every forgery refused here or charged and forwarded',
          async () =>
            refusedHere() + (await writesConsumed(gw, `pk:${pk}`)) - held === forgeries.length,
          20_000,
        );
        for (const [i, f] of forgers.entries()) {
          const ok = f.received.find((m) => m[0] === 'OK' && m[1] === forgeries[i]!.id);
          if (ok)
            assert.match(String(ok[3]), /^invalid:/, `refused as a forgery: ${String(ok[3])}`);
        }
        return forgers
          .map((f, i) => ({ f, forgery: forgeries[i]! }))
          .filter(({ f, forgery }) => !answered(f, forgery.id));
      }

      /**
       * A fresh victim, unknown here, and FORGERS forgeries in its name sent at once from
       * 127.0.<subnet>.10 on, the relay's frames held: exactly one is forwarded on its hash.
       */
      async function firstWave(subnet: string) {
        const { pk, event } = victimKeys();
        const forgeries = forgeriesOf(event, FORGERS);
        const rejectedBefore = await badSignatures(suite.relay().url);
        suite.proxy().hold();
        const forwarded = await sendAtOnce(forgeries, subnet, pk);
        assert.equal(
          forwarded.length,
          1,
          `forgeries forwarded on the hash at once (one is the attack; more, the rule broken)`,
        );
        assert.equal(await writesConsumed(gw, `pk:${pk}`), 1, 'the victim holds one charge');
        return { pk, event, forgeries, forwarded, rejectedBefore };
      }

      it('a slow relay: at most one forwarded, none within the margin, the victim still writes, each forger pays, none stored', async () => {
        const { pk, event, forgeries, forwarded, rejectedBefore } = await firstWave('21');

        // A second wave once that charge is counted, the relay still silent: the victim is known
        // here now, with no more than the margin left, so each is verified first and refused.
        const late = await sendAtOnce(forgeriesOf(event, LATE_FORGERS), '23', pk, 1);
        assert.equal(late.length, 0, 'no forgery forwarded within the margin');
        assert.equal(await writesConsumed(gw, `pk:${pk}`), 1, 'the victim still holds one charge');

        // The victim's own event meanwhile: charged (it is known now, near its limit: verified)
        // and forwarded, not refused.
        const victim = await RawNostr.open(gw.url, '127.0.21.2');
        sockets.push(victim);
        const mine = event('mine');
        victim.send(['EVENT', mine]);
        await waitFor(
          'the victim charged for its own event',
          async () => (await writesConsumed(gw, `pk:${pk}`)) === 2,
          20_000,
        );
        assert.ok(!answered(victim, mine.id), 'the victim was not refused (it awaits the relay)');
        for (let i = 0; i < FORGERS; i++) {
          assert.equal(await writesConsumed(gw, `ip:127.0.21.${i + 10}`), 1, 'each forger paid');
        }
        for (let i = 0; i < LATE_FORGERS; i++) {
          assert.equal(await writesConsumed(gw, `ip:127.0.23.${i + 10}`), 1, 'each forger paid');
        }

        // The relay answers at last: the forgery refused, its charge given back; the victim's
        // event stored.
        suite.proxy().release();
        const ok = await victim.okFor(mine.id);
        assert.deepEqual(ok.slice(0, 3), ['OK', mine.id, true]);
        for (const { f, forgery } of forwarded) {
          assert.match(String((await f.okFor(forgery.id))[3]), /^invalid:/);
        }
        await waitFor(
          'the victim given back the forgery',
          async () => (await writesConsumed(gw, `pk:${pk}`)) === 1,
          20_000,
        );
        assert.equal(
          (await badSignatures(suite.relay().url)) - rejectedBefore,
          forwarded.length,
          'the relay saw only the forwarded forgery',
        );
        for (const forgery of forgeries)
          assert.equal(await relayHas(suite.relay().url, forgery.id), false);
        assert.equal(await relayHas(suite.relay().url, mine.id), true);
      });

      it('a relay that closes with the forgery awaited: the victim given back, nothing stored', async () => {
        const { pk, event, forgeries, rejectedBefore } = await firstWave('22');

        // The relay's sockets close, the forwarded forgery unanswered: its ticket settles lost,
        // the event does not verify, so the victim's point comes back.
        suite.proxy().cut();
        await waitFor(
          'the victim given back the lost forgery',
          async () => (await writesConsumed(gw, `pk:${pk}`)) === 0,
          20_000,
        );
        for (let i = 0; i < FORGERS; i++) {
          assert.equal(await writesConsumed(gw, `ip:127.0.22.${i + 10}`), 1, 'each forger paid');
        }
        assert.equal(await badSignatures(suite.relay().url), rejectedBefore, 'the relay saw none');
        for (const forgery of forgeries)
          assert.equal(await relayHas(suite.relay().url, forgery.id), false);

        // Its whole quota is its own again.
        const victim = await RawNostr.open(gw.url, '127.0.22.2');
        sockets.push(victim);
        for (const mine of [event('mine'), event('mine again')]) {
          victim.send(['EVENT', mine]);
          assert.deepEqual((await victim.okFor(mine.id)).slice(0, 3), ['OK', mine.id, true]);
        }
        assert.equal(await writesConsumed(gw, `pk:${pk}`), LIMIT);
        if (leases) {
          const credited = 'event="credited"';
          assert.ok((await metricValue(gw, 'sluice_lease_points_total', credited)) > 0);
        }
      });
    },
  );
}
