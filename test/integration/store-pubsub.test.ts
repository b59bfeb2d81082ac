import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { createStore } from '../../src/store/index.js';
import type { Store, Subscription } from '../../src/store/index.js';
import { matrix, storeOptions } from '../helpers/env.js';

for (const { client, mode } of matrix()) {
  describe(`store pub/sub and leases: ${client} on ${mode}`, { timeout: 60_000 }, () => {
    let store: Store;
    let sub: Subscription | undefined;
    before(async () => {
      store = await createStore(storeOptions(client, mode));
    });
    after(async () => {
      await sub?.close();
      await store.close();
    });

    it('delivers a PUBLISH to a subscriber of the same client kind', async () => {
      const channel = `test:chan:${randomUUID()}`;
      const received: string[] = [];
      sub = await store.subscribe(channel, (m) => received.push(m));
      // A subscription may take a moment to register on every node of a cluster.
      const deadline = Date.now() + 5000;
      while (received.length === 0 && Date.now() < deadline) {
        await store.kv.publish(channel, 'hello');
        await sleep(50);
      }
      assert.ok(received.includes('hello'), `received ${JSON.stringify(received)}`);
    });

    it('writes a key with a lease that expires unless renewed', async () => {
      const key = `test:lease:{${randomUUID()}}`;
      // A lease long enough that a busy machine still reads the key back before it lapses.
      await store.kv.setWithLease(key, '{"m":0.5}', 1000);
      assert.equal(await store.kv.get(key), '{"m":0.5}');
      // Gone once the lease runs out: waited for, with a deadline well past it.
      const deadline = Date.now() + 10_000;
      let value = await store.kv.get(key);
      while (value !== null && Date.now() < deadline) {
        await sleep(50);
        value = await store.kv.get(key);
      }
      assert.equal(value, null, 'the lease lapsed');
    });
  });
}
