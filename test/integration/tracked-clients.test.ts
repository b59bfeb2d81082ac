/**
 * Forgetting a client never admits it beyond its limit while the real Valkey answers (the
 * bounds themselves, in process: test/unit/gateway/tracked-clients.test.ts).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { GatewayConfigSchema } from '../../src/config/schema.js';
import { MultiplierBoard } from '../../src/pressure/follower/board.js';
import { QuotaDecider } from '../../src/quota/decider.js';
import { Policy, makeIdentity } from '../../src/quota/policy.js';
import { createStore } from '../../src/store/index.js';
import type { Store } from '../../src/store/index.js';
import { storeOptions, uniquePrefix } from '../helpers/env.js';

describe('an evicted client against the real Valkey', { timeout: 60_000 }, () => {
  let store: Store;
  before(async () => {
    store = await createStore(storeOptions('iovalkey', 'standalone'));
  });
  after(async () => {
    await store.close();
  });

  it('is never admitted beyond its limit, however often it is forgotten', async () => {
    const quotas = {
      ...GatewayConfigSchema.parse({
        admin: { token: 'a-test-token-of-some-length' },
        upstreams: [{ id: 'relay-a', url: 'http://127.0.0.1:1' }],
        quotas: { tiers: { default: { write: { points: 2, windowSec: 60 } } } },
      }).quotas,
      keyPrefix: uniquePrefix('evicted'),
    };
    const board = new MultiplierBoard(['relay-a']);
    const decider = new QuotaDecider(store, new Policy(quotas), board, quotas, {
      maxTrackedClients: 5,
    });
    const clients = 40;
    const admitted = new Array<number>(clients).fill(0);
    let fromMemory = 0;
    // Round after round over 40 clients, 5 held: each is forgotten between its own writes.
    for (let round = 0; round < 4; round++) {
      for (let i = 0; i < clients; i++) {
        const d = (await decider.decide({
          identity: makeIdentity('ip', `203.0.113.${i}`, 'default', 'test-salt'),
          ip: `203.0.113.${i}`,
          cls: 'write',
          cost: 1,
          nodeId: 'relay-a',
        }))!;
        if (d.admitted) admitted[i]!++;
        if (d.fromMemory) fromMemory++;
      }
    }
    assert.deepEqual(new Set(admitted), new Set([2]), 'every client got exactly its 2 writes');
    assert.equal(fromMemory, 0, 'none was still held when it came back');
    assert.equal(decider.trackedClients()['in-memory-blocks'], 5);
  });
});
