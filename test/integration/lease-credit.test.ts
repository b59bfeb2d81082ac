/**
 * Credit for a first write (quotas.lease.credit) on a real Valkey and real gateway processes:
 * the presence set that tells a gateway it is the quotas' only taker, credit granted only
 * then, and nothing admitted past a limit with it, alone or once a second gateway joins.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { FleetPresence } from '../../src/quota/fleet-presence.js';
import { MODES, suiteStore, uniquePrefix } from '../helpers/env.js';
import { metricValue, startGateway } from '../helpers/gateway.js';
import type { GatewayUnderTest } from '../helpers/gateway.js';
import { httpWrites } from '../helpers/http-writes.js';
import { startRelay } from '../helpers/processes.js';
import type { SluiceProcess } from '../helpers/processes.js';
import { waitFor } from '../helpers/raw-socket.js';

const { write, freshClient } = httpWrites(60);

const credited = (gw: GatewayUnderTest) =>
  metricValue(gw, 'sluice_lease_points_total', 'event="credited"');

for (const mode of MODES) {
  describe(`gateway presence on ${mode} Valkey`, { timeout: 60_000 }, () => {
    const store = suiteStore('iovalkey', mode);

    it('is alone only while no other process beat within the longest window', async () => {
      const key = `${uniquePrefix('presence')}:presence`;
      const opts = { key: () => key, longestWindowMs: () => 1000 };
      const first = new FleetPresence(store().presence, opts);
      await first.start();
      assert.equal(first.alone(), true, 'the first process is alone');
      const second = new FleetPresence(store().presence, opts);
      await second.start();
      assert.equal(second.alone(), false, 'the second sees the first');
      await waitFor('the first to see the second', () => !first.alone(), 3000);
      second.stop();
      // A stopped (or crashed) process counts until its window and the beats' slack pass.
      await first.beat();
      assert.equal(first.alone(), false, 'the stopped one still counts');
      await waitFor(
        'the stopped one to be forgotten',
        async () => {
          await first.beat();
          return first.alone();
        },
        10_000,
      );
      first.stop();
      assert.equal(first.alone(), false, 'a stopped presence confirms nothing');
    });

    it("beats under the quotas' key in force, and not at all while quotas are off", async () => {
      const before = `${uniquePrefix('presence')}:presence`;
      const moved = `${uniquePrefix('presence')}:presence`;
      let key: string | undefined = undefined; // quotas off at start
      const reloaded = new FleetPresence(store().presence, {
        key: () => key,
        longestWindowMs: () => 1000,
      });
      await reloaded.start();
      assert.equal(reloaded.alone(), false, 'quotas off: not alone, and no beat');
      const there = new FleetPresence(store().presence, {
        key: () => moved,
        longestWindowMs: () => 1000,
      });
      await there.start();
      assert.equal(there.alone(), true, 'nobody beat under the key while quotas were off');
      key = before; // a reload turns quotas on
      await reloaded.beat();
      assert.equal(reloaded.alone(), true, 'alone under its own key');
      key = moved; // a reload moves the quotas (quotas.keyPrefix) where the other one is
      await reloaded.beat();
      assert.equal(reloaded.alone(), false, 'it sees the process already under the new key');
      await there.beat();
      assert.equal(there.alone(), false, 'and that one sees it');
      reloaded.stop();
      there.stop();
    });
  });
}

describe('credit through a gateway on standalone Valkey', { timeout: 120_000 }, () => {
  const LIMIT = 5;
  let relay: SluiceProcess;
  let first: GatewayUnderTest;
  const prefix = uniquePrefix('credit');
  const settings = {
    identity: { order: ['ip'] },
    quotas: {
      keyPrefix: prefix,
      tiers: { default: { write: { points: LIMIT, windowSec: 60 } } },
    },
  };

  before(async () => {
    relay = await startRelay({ nodeId: 'relay-a' });
    first = await startGateway('iovalkey', 'standalone', [{ id: 'relay-a', url: relay.url }], {
      ...settings,
    });
    // The first take of a window length teaches the gateway's filter that length.
    assert.equal((await write(first, freshClient())).status, 200);
  });
  after(async () => {
    await first?.proc.stop();
    await relay?.stop();
  });

  it("admits a new client's first write on credit, and never past its limit", async () => {
    const before = await credited(first);
    const clients = Array.from({ length: 6 }, () => freshClient());
    for (const ip of clients) {
      const statuses: number[] = [];
      for (let i = 0; i < LIMIT * 2; i++) statuses.push((await write(first, ip)).status);
      assert.deepEqual(
        statuses,
        [...Array<number>(LIMIT).fill(200), ...Array<number>(LIMIT).fill(429)],
        `${ip}: exactly its limit admitted`,
      );
    }
    assert.equal((await credited(first)) - before, clients.length, 'one credit a new client');
    const over = await metricValue(first, 'sluice_lease_points_total', 'event="overcredited"');
    assert.equal(over, 0, 'every credited point was granted by Valkey');
  });

  it('stops crediting once a second gateway shares the quotas, and admits none past a limit', async () => {
    const second = await startGateway(
      'iovalkey',
      'standalone',
      [{ id: 'relay-a', url: relay.url }],
      settings,
    );
    try {
      // Within a beat or two the first sees the second: fresh clients take, not credit.
      await waitFor(
        'the first gateway to stop crediting',
        async () => {
          const was = await credited(first);
          await write(first, freshClient());
          return (await credited(first)) === was;
        },
        5000,
      );
      const ip = freshClient();
      let admitted = 0;
      for (let i = 0; i < LIMIT * 2; i++) {
        const gw = i % 2 === 0 ? first : second;
        if ((await write(gw, ip)).status === 200) admitted++;
      }
      assert.equal(admitted, LIMIT, 'two gateways: exactly the limit');
      assert.equal(await credited(second), 0, 'the second never credits: it is not alone');
    } finally {
      await second.proc.stop();
    }
  });
});
