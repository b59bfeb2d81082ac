/**
 * The node budget through each Valkey client on both topologies: two deciders (two gateways)
 * over one store share one counter per node, so together they admit exactly budget x m per
 * window under concurrent writes of many identities, and the counter sits at
 * `<keyPrefix>:node:<nodeId>`.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { GatewayConfigSchema } from '../../src/config/schema.js';
import { MultiplierBoard } from '../../src/pressure/follower/board.js';
import { QuotaDecider } from '../../src/quota/decider.js';
import { Policy, makeIdentity } from '../../src/quota/policy.js';
import { matrix, suiteStore, uniquePrefix } from '../helpers/env.js';

const BUDGET = { points: 40, windowSec: 30 };

for (const { client, mode } of matrix()) {
  describe(`node budget: ${client} on ${mode}`, { timeout: 60_000 }, () => {
    const store = suiteStore(client, mode);

    it('two gateways together admit budget x m, whoever writes', async () => {
      const config = GatewayConfigSchema.parse({
        admin: { token: 'node-budget-store-token-0123' },
        upstreams: [{ id: 'relay-a', url: 'http://127.0.0.1:9', writeBudget: BUDGET }],
        quotas: { keyPrefix: uniquePrefix('nbudget'), gateways: 2 },
      });
      const gateways = [0, 1].map(() => {
        const board = new MultiplierBoard(['relay-a']);
        board.setOverride('relay-a', 0.5);
        return new QuotaDecider(store(), new Policy(config.quotas), board, config.quotas, {
          writeBudgets: new Map([['relay-a', BUDGET]]),
        });
      });
      const writes = Array.from({ length: 60 }, (_, i) =>
        gateways[i % 2]!.decideNode({
          identity: makeIdentity('ip', `198.51.100.${i}`, 'default', 'salt'),
          ip: `198.51.100.${i}`,
          cls: 'write',
          cost: 1,
          nodeId: 'relay-a',
        }),
      );
      const decisions = await Promise.all(writes);
      assert.ok(decisions.every((d) => d && (d.outcome === 'allowed' || d.outcome === 'limited')));
      assert.equal(decisions.filter((d) => d!.admitted).length, 20, 'budget 40 x 0.5');
      // All 60 were in flight at once, so each reached Valkey: the counter holds them all.
      const state = await gateways[0]!.nodeBudgetState('relay-a');
      assert.deepEqual([state?.inForce, state?.effective, state?.consumed], [true, 20, 60]);
      const counter = await store().kv.get(`${config.quotas.keyPrefix}:node:relay-a`);
      assert.equal(Number(counter), 60, 'one counter for the node, under quotas.keyPrefix');
    });
  });
}
