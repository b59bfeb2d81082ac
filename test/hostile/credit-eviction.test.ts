/**
 * Attack on credit for a first write (quotas.lease.credit): an author brought to its limit,
 * then a flood of new authors, each from an address of its own and under its own quota, that
 * pushes the author out of the gateway's lease book (limits.maxTrackedClients is small here),
 * then the author again, over a raw socket. The lease book no longer knows it; the filter of
 * keys this process took for in the window does: no credit, a take that Valkey refuses, and
 * the event never reaches the relay.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { metricValue, startGateway } from '../helpers/gateway.js';
import type { GatewayUnderTest } from '../helpers/gateway.js';
import { victimKeys } from '../helpers/hash-path.js';
import { relayHas } from '../helpers/nostr-events.js';
import { startRelay } from '../helpers/processes.js';
import type { RelayProcess } from '../helpers/processes.js';
import { RawNostr } from '../helpers/raw-nostr.js';

const LIMIT = 2;
/** Held in memory per structure: the flood below is many times this. */
const TRACKED = 16;
const FLOOD = 80;

describe(
  'an author at its limit, pushed out of memory by a flood of new authors',
  { timeout: 120_000 },
  () => {
    let relay: RelayProcess;
    let gw: GatewayUnderTest;
    const sockets: RawNostr[] = [];

    before(async () => {
      relay = await startRelay({ nodeId: 'relay-a' });
      gw = await startGateway('iovalkey', 'standalone', [{ id: 'relay-a', url: relay.url }], {
        identity: { order: ['pubkey', 'ip'] },
        quotas: {
          keyPrefix: `crediteviction${Date.now().toString(36)}`,
          tiers: { default: { write: { points: LIMIT, windowSec: 60 } } },
        },
        limits: { maxTrackedClients: TRACKED },
      });
    });
    after(async () => {
      for (const s of sockets) s.close();
      await gw?.proc.stop();
      await relay?.stop();
    });

    /** One event over a new raw connection from `from`: the gateway's OK for it. */
    async function send(from: string, event: { id: string }): Promise<unknown[]> {
      const socket = await RawNostr.open(gw.url, from);
      sockets.push(socket);
      socket.send(['EVENT', event]);
      return socket.okFor(event.id);
    }

    it('gets no credit again: refused rate-limited, and nothing stored', async () => {
      // The first take of the window's length teaches the gateway's filter that length.
      assert.equal((await send('127.0.90.2', victimKeys().event('first')))[2], true);
      const victim = victimKeys();
      for (let i = 0; i < LIMIT; i++) {
        const ok = await send(`127.0.91.${i + 2}`, victim.event(`mine ${i}`));
        assert.equal(ok[2], true, `the author's own write ${i} is stored: ${JSON.stringify(ok)}`);
      }
      const creditedBefore = await metricValue(gw, 'sluice_lease_points_total', 'event="credited"');
      assert.ok(creditedBefore > 0, 'credit is on: some of those writes were credited');

      // Every flood author new, each from an address of its own: all stored, the author's
      // key pushed out of the lease book many times over.
      const flood = await Promise.all(
        Array.from({ length: FLOOD }, (_, i) =>
          send(`127.0.${92 + Math.floor(i / 200)}.${(i % 200) + 2}`, victimKeys().event(`f${i}`)),
        ),
      );
      assert.ok(
        flood.every((ok) => ok[2] === true),
        'the flood is within its quotas',
      );
      const credited = await metricValue(gw, 'sluice_lease_points_total', 'event="credited"');
      assert.ok(credited - creditedBefore >= FLOOD, 'the flood authors were credited');

      const again = victim.event('past my limit');
      const ok = await send('127.0.95.2', again);
      assert.equal(ok[2], false, `refused: ${JSON.stringify(ok)}`);
      assert.match(String(ok[3]), /^rate-limited:/);
      assert.equal(await relayHas(relay.url, again.id), false, 'never reached the relay');
      const over = await metricValue(gw, 'sluice_lease_points_total', 'event="overcredited"');
      assert.equal(over, 0);
    });
  },
);
