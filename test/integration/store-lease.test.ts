/**
 * Quota leases on a real Valkey, every client on both topologies: a take never grants past
 * the limit however many race for it, shares its count with the limiter's own consumes, and
 * points go back only to the window that leased them.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Cluster as IoValkeyCluster, Redis as IoValkey } from 'iovalkey';
import { MAX_TAKES_PER_CALL } from '../../src/store/lease.js';
import { StoreError, clientKey } from '../../src/store/index.js';
import type { Lease } from '../../src/store/index.js';
import { waitFor } from '../helpers/raw-socket.js';
import { clusterNodes, matrix, standaloneNodes, suiteStore, uniquePrefix } from '../helpers/env.js';
import type { Topology } from '../../src/store/index.js';

/** Run `use` on a plain iovalkey client of the topology's Valkey, closed after. */
async function withRaw<T>(
  mode: Topology,
  use: (raw: IoValkey | IoValkeyCluster) => Promise<T>,
): Promise<T> {
  const raw =
    mode === 'cluster'
      ? new IoValkeyCluster(clusterNodes(), { lazyConnect: true })
      : new IoValkey({ ...standaloneNodes()[0]!, lazyConnect: true });
  try {
    await raw.connect();
    return await use(raw);
  } finally {
    raw.disconnect();
  }
}

/** Scripts the standalone Valkey has run so far (EVALSHA and EVAL), from INFO commandstats. */
async function scriptCalls(): Promise<number> {
  const info = await withRaw('standalone', (raw) => (raw as IoValkey).info('commandstats'));
  let calls = 0;
  for (const m of info.matchAll(/^cmdstat_(?:evalsha|eval):calls=(\d+)/gm)) calls += Number(m[1]);
  return calls;
}

for (const { client, mode } of matrix()) {
  describe(`leases: ${client} on ${mode}`, { timeout: 60_000 }, () => {
    const store = suiteStore(client, mode);

    it('racing takes grant exactly the limit, never more', async () => {
      const key = `${uniquePrefix('lease-race')}:${clientKey('10.0.0.1')}`;
      const leases = await Promise.all(
        Array.from({ length: 20 }, () => store().leases.take(key, 7, 50, 30_000)),
      );
      assert.equal(
        leases.reduce((sum, l) => sum + l.granted, 0),
        50,
      );
      assert.ok(leases.every((l) => l.granted >= 0 && l.granted <= 7 && l.consumed <= 50));
      const last = await store().leases.take(key, 5, 50, 30_000);
      assert.equal(last.granted, 0);
      assert.equal(last.consumed, 50);
      assert.ok(last.msLeft > 25_000 && last.msLeft <= 30_000, `window ${last.msLeft} ms`);
    });

    it('shares one count with the limiter of the same quota', async () => {
      const prefix = uniquePrefix('lease-shared');
      const id = clientKey('10.0.0.2');
      const limiter = store().limiter({ keyPrefix: prefix, points: 10, duration: 30 });
      for (let i = 0; i < 3; i++) assert.ok((await limiter.consume(id)).allowed);
      const lease = await store().leases.take(`${prefix}:${id}`, 100, 10, 30_000);
      assert.equal(lease.granted, 7, 'what the limiter consumed is not leased again');
      const next = await limiter.consume(id);
      assert.equal(next.allowed, false);
      assert.equal(next.consumed, 11);
    });

    it('gives points back to the window that leased them, and to no other', async () => {
      const key = `${uniquePrefix('lease-back')}:${clientKey('10.0.0.3')}`;
      const lease = await store().leases.take(key, 8, 10, 30_000);
      assert.equal(lease.granted, 8);
      assert.equal(await store().leases.giveBack(key, 5, lease.msLeft, 200), 5);
      assert.equal((await store().leases.take(key, 10, 10, 30_000)).granted, 7);
      // A window that ends within the slack, or one that outlives the caller's, gets nothing.
      assert.equal(await store().leases.giveBack(key, 5, 150, 200), 0);
      assert.equal(await store().leases.giveBack(key, 5, lease.msLeft - 5_000, 200), 0);
      assert.equal((await store().leases.take(key, 1, 10, 30_000)).consumed, 10);
    });

    it('a new window after the old one ends: leased afresh, old points not given back to it', async () => {
      const key = `${uniquePrefix('lease-window')}:${clientKey('10.0.0.4')}`;
      const first = await store().leases.take(key, 10, 10, 300);
      assert.equal(first.granted, 10);
      let fresh: Lease | undefined;
      await waitFor('the 300 ms window to end', async () => {
        fresh = await store().leases.take(key, 4, 10, 30_000);
        return fresh.granted > 0;
      });
      assert.ok(fresh);
      assert.equal(fresh.granted, 4);
      assert.ok(fresh.msLeft > 25_000, 'the new window has its own length');
      // What the caller believed of the old window (its 300 ms) no longer matches any key.
      assert.equal(await store().leases.giveBack(key, 10, 250, 20), 0);
      assert.equal((await store().leases.take(key, 0, 10, 30_000)).consumed, 4);
    });

    it('a take beyond its need gets at most what is left / divisor, and nothing below its need', async () => {
      const key = `${uniquePrefix('lease-share')}:${clientKey('10.0.0.5')}`;
      const share = await store().leases.take(key, 64, 40, 30_000, { need: 1, divisor: 4 });
      assert.equal(share.granted, 10, '40 left / 4');
      const big = await store().leases.take(key, 20, 40, 30_000, { need: 20, divisor: 4 });
      assert.equal(big.granted, 20, 'the need is granted whole while it fits');
      const short = await store().leases.take(key, 12, 40, 30_000, { need: 12, divisor: 4 });
      assert.equal(short.granted, 0, '10 left: fewer than needed, so nothing is taken');
      assert.equal(short.consumed, 30);
      const last = await store().leases.take(key, 64, 40, 30_000, { need: 1, divisor: 4 });
      assert.equal(last.granted, 2, 'floor(10 / 4)');
    });

    it('the takes of one moment each get their own answer, as if taken one by one', async () => {
      const prefix = uniquePrefix('lease-moment');
      const full = `${prefix}:full`;
      await store().leases.take(full, 10, 10, 30_000);
      const many = Array.from({ length: 2 * MAX_TAKES_PER_CALL + 22 }, (_, i) => `${prefix}:n${i}`);
      const callsBefore = mode === 'standalone' ? await scriptCalls() : 0;
      // All asked in one turn: in standalone they leave in as few calls as the cap allows.
      const [fresh, atLimit, shared, twiceA, twiceB, ...ones] = await Promise.all([
        store().leases.take(`${prefix}:fresh`, 5, 10, 30_000),
        store().leases.take(full, 3, 10, 30_000),
        store().leases.take(`${prefix}:shared`, 64, 40, 30_000, { need: 1, divisor: 4 }),
        store().leases.take(`${prefix}:twice`, 7, 10, 30_000),
        store().leases.take(`${prefix}:twice`, 7, 10, 30_000),
        ...many.map((key) => store().leases.take(key, 1, 1, 30_000)),
      ]);
      if (mode === 'standalone') {
        const calls = (await scriptCalls()) - callsBefore;
        // The first leaves at once, alone; the rest of the moment together.
        const expected = 1 + Math.ceil((4 + many.length) / MAX_TAKES_PER_CALL);
        assert.equal(calls, expected, `${5 + many.length} takes of one turn in ${calls} calls`);
      }
      assert.deepEqual([fresh.granted, fresh.consumed], [5, 5]);
      assert.deepEqual([atLimit.granted, atLimit.consumed], [0, 10]);
      assert.equal(shared.granted, 10, 'a quarter of the 40 left');
      assert.deepEqual(
        [twiceA.granted, twiceB.granted, twiceB.consumed],
        [7, 3, 10],
        'the same key twice in one moment: the second take sees the first',
      );
      assert.equal(ones.length, many.length);
      assert.ok(ones.every((l) => l.granted === 1 && l.consumed === 1 && l.msLeft > 25_000));
    });

    it('a key that holds no count fails its own take, and the others of its moment stand', async () => {
      const prefix = uniquePrefix('lease-garbage');
      await store().kv.set(`${prefix}:garbage`, 'not-a-count');
      await withRaw(mode, (raw) => raw.hset(`${prefix}:hash`, 'f', '1'));
      const [garbage, hash, good] = await Promise.allSettled([
        store().leases.take(`${prefix}:garbage`, 1, 10, 30_000),
        store().leases.take(`${prefix}:hash`, 1, 10, 30_000),
        store().leases.take(`${prefix}:good`, 2, 10, 30_000),
      ]);
      for (const failed of [garbage, hash]) {
        assert.equal(failed.status, 'rejected');
        const reason = failed.reason as Error;
        assert.ok(reason instanceof StoreError, String(reason));
        assert.match(reason.message, /holds no count/);
      }
      assert.equal(good.status, 'fulfilled');
      assert.equal(good.value.granted, 2);
      assert.equal(await store().kv.get(`${prefix}:garbage`), 'not-a-count', 'left as it was');
      const fields = await withRaw(mode, (raw) => raw.hgetall(`${prefix}:hash`));
      assert.deepEqual(fields, { f: '1' }, 'left as it was');
    });

    it('refuses a want, limit or window that is not a whole number', async () => {
      await assert.rejects(store().leases.take('k', 1.5, 10, 1000), RangeError);
      await assert.rejects(store().leases.take('k', 1, -1, 1000), RangeError);
    });
  });
}
