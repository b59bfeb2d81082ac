/**
 * The admitted-writes counter the learned budget reads (store/admitted.ts), on a real Valkey,
 * every client on both topologies: additions from racing gateways sum exactly, a node's
 * counts stay on its own key, the key expires, and garbage where the counts go reads as 0.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ADMITTED_TTL_MS, admittedKey } from '../../src/store/admitted.js';
import { matrix, suiteStore, uniquePrefix } from '../helpers/env.js';

for (const { client, mode } of matrix()) {
  describe(`admitted counts: ${client} on ${mode}`, { timeout: 60_000 }, () => {
    const store = suiteStore(client, mode);

    it('sums racing additions exactly, per node', async () => {
      const node = uniquePrefix('admitted');
      const other = `${node}-b`;
      assert.deepEqual(await store().admitted.read(node), { bytes: 0, points: 0 });
      await Promise.all(
        Array.from({ length: 40 }, (_, i) => store().admitted.add(node, 1000 + i, 1)),
      );
      await store().admitted.add(other, 7, 7);
      assert.deepEqual(await store().admitted.read(node), { bytes: 40_780, points: 40 });
      assert.deepEqual(await store().admitted.read(other), { bytes: 7, points: 7 });
      await assert.rejects(store().admitted.add(node, -1, 0), RangeError);
      await assert.rejects(store().admitted.add(node, 1.5, 0), RangeError);
      assert.ok(ADMITTED_TTL_MS >= 60_000);
    });

    it('reads garbage where the counts go as nothing, never throws on a wrong type', async () => {
      const node = uniquePrefix('admitted-garbage');
      await store().kv.set(admittedKey(node), 'not a hash');
      // HMGET on a string is a WRONGTYPE error: the feed skips that tick (estimate kept).
      await assert.rejects(store().admitted.read(node));
      await store().kv.del(admittedKey(node));
      assert.deepEqual(await store().admitted.read(node), { bytes: 0, points: 0 });
    });
  });
}
