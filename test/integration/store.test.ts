import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import {
  CLIENT_KINDS,
  StoreConfigError,
  StoreConnectError,
  clientKey,
  createStore,
} from '../../src/store/index.js';
import type { Decision, Store } from '../../src/store/index.js';
import { openNodeConnection } from '../../src/store/node.js';
import {
  clusterNodes,
  matrix,
  nodesFor,
  storeOptions,
  suiteStore,
  uniquePrefix,
  unusedPort,
} from '../helpers/env.js';

/** Each suite's bound (a few seconds each against the suite's Valkey): a stuck test fails, it does not hang the run. */
const BOUND = { timeout: 120_000 };

/** Count keys under a prefix on one node (SCAN, so it works on a cluster primary). */
async function countKeys(port: number, prefix: string): Promise<number> {
  const conn = await openNodeConnection({ host: '127.0.0.1', port });
  try {
    let cursor = '0';
    let count = 0;
    do {
      const [next, keys] = (await conn.call(
        'SCAN',
        cursor,
        'MATCH',
        `${prefix}*`,
        'COUNT',
        1000,
      )) as [string, string[]];
      cursor = next;
      count += keys.length;
    } while (cursor !== '0');
    return count;
  } finally {
    conn.close();
  }
}

for (const { client, mode } of matrix()) {
  describe(`store: ${client} on ${mode}`, BOUND, () => {
    const store = suiteStore(client, mode);

    it('admits exactly N of N+5 concurrent consumes for one key and rejects the rest', async () => {
      const limiter = store().limiter({
        keyPrefix: uniquePrefix('exact'),
        points: 10,
        duration: 30,
      });
      const key = clientKey('client-a');
      const decisions = await Promise.all(Array.from({ length: 15 }, () => limiter.consume(key)));
      const allowed = decisions.filter((d) => d.allowed);
      const rejected = decisions.filter((d) => !d.allowed);
      assert.equal(allowed.length, 10);
      assert.equal(rejected.length, 5);
      for (const d of rejected) {
        assert.ok(d.msBeforeNext > 0, `msBeforeNext ${d.msBeforeNext} should be > 0`);
        assert.equal(d.remaining, 0);
        assert.equal(d.limit, 10);
      }
      // Each admitted consume saw a distinct count 1..10: the increments are atomic.
      assert.deepEqual(
        allowed.map((d) => d.consumed).sort((a, b) => a - b),
        [1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
      );
    });

    it('keeps separate counters for separate clients', async () => {
      const limiter = store().limiter({
        keyPrefix: uniquePrefix('separate'),
        points: 2,
        duration: 30,
      });
      const a = clientKey('client-a');
      const b = clientKey('client-b');
      for (let i = 0; i < 3; i++) await limiter.consume(a);
      const first = await limiter.consume(b);
      assert.equal(first.allowed, true);
      assert.equal(first.remaining, 1);
    });

    it('reports the client settings in force', () => {
      assert.equal(store().settings.client, client);
      assert.equal(store().settings.mode, mode);
      const timeout =
        client === 'valkey-glide'
          ? store().settings.requestTimeoutMs
          : store().settings.commandTimeoutMs;
      assert.equal(timeout, 1000);
    });
  });
}

for (const mode of ['standalone', 'cluster'] as const) {
  describe(`mixed fleet on ${mode}`, BOUND, () => {
    const stores: Store[] = [];
    before(async () => {
      for (const client of CLIENT_KINDS) stores.push(await createStore(storeOptions(client, mode)));
    });
    after(async () => {
      await Promise.all(stores.map((s) => s.close()));
    });

    it('shares one counter across the three clients and enforces the total', async () => {
      const keyPrefix = uniquePrefix('fleet');
      const limiters = stores.map((s) => s.limiter({ keyPrefix, points: 9, duration: 30 }));
      const key = clientKey('shared-client');
      const decisions: Decision[] = [];
      for (let i = 0; i < 15; i++) decisions.push(await limiters[i % 3]!.consume(key));
      assert.deepEqual(
        decisions.map((d) => d.consumed),
        Array.from({ length: 15 }, (_, i) => i + 1),
      );
      assert.equal(decisions.filter((d) => d.allowed).length, 9);
      assert.ok(decisions.slice(9).every((d) => !d.allowed));
    });
  });
}

describe('cluster key distribution', BOUND, () => {
  for (const client of CLIENT_KINDS) {
    it(`${client}: 1000 client keys land on all three primaries`, async () => {
      const store = await createStore(storeOptions(client, 'cluster'));
      try {
        const keyPrefix = uniquePrefix('spread');
        const limiter = store.limiter({ keyPrefix, points: 5, duration: 60 });
        for (let start = 0; start < 1000; start += 100) {
          await Promise.all(
            Array.from({ length: 100 }, (_, i) =>
              limiter.consume(clientKey(`client-${start + i}`)),
            ),
          );
        }
        const primaries = clusterNodes().slice(0, 3);
        const counts = await Promise.all(primaries.map((n) => countKeys(n.port, keyPrefix)));
        assert.equal(
          counts.reduce((a, b) => a + b, 0),
          1000,
          `per primary: ${counts.join(', ')}`,
        );
        // An even spread expects ~333 each; a hash tag on the prefix would put all 1000 on one.
        for (const count of counts) assert.ok(count > 250, `per primary: ${counts.join(', ')}`);
      } finally {
        await store.close();
      }
    });
  }
});

for (const mode of ['standalone', 'cluster'] as const) {
  it(
    `valkey-glide on ${mode}: the next consume succeeds after FUNCTION FLUSH on the primaries`,
    BOUND,
    async () => {
      const store = await createStore(storeOptions('valkey-glide', mode));
      try {
        const limiter = store.limiter({
          keyPrefix: uniquePrefix('flush'),
          points: 5,
          duration: 30,
        });
        const key = clientKey('client-flush');
        assert.equal((await limiter.consume(key)).consumed, 1);
        const primaries = mode === 'cluster' ? nodesFor(mode).slice(0, 3) : nodesFor(mode);
        for (const node of primaries) {
          const conn = await openNodeConnection(node);
          await conn.call('FUNCTION', 'FLUSH');
          conn.close();
        }
        const next = await limiter.consume(key);
        assert.equal(next.allowed, true);
        assert.equal(next.consumed, 2);
      } finally {
        await store.close();
      }
    },
  );
}

describe('bad configuration fails at start with a message that names the problem', BOUND, () => {
  it('rejects an unknown client name', async () => {
    await assert.rejects(
      createStore({ client: 'redis-py' as never, nodes: nodesFor('standalone') }),
      (err: Error) =>
        err instanceof StoreConfigError &&
        /client/.test(err.message) &&
        /redis-py/.test(err.message),
    );
  });

  it('rejects an empty node list', async () => {
    await assert.rejects(
      createStore({ client: 'ioredis', nodes: [] }),
      (err: Error) => err instanceof StoreConfigError && /nodes/.test(err.message),
    );
  });

  it('rejects a port out of range, naming the key', async () => {
    await assert.rejects(
      createStore({ client: 'iovalkey', nodes: [{ host: '127.0.0.1', port: 70000 }] }),
      (err: Error) => err instanceof StoreConfigError && /nodes\.0\.port/.test(err.message),
    );
  });

  for (const { client, mode } of matrix()) {
    it(`${client} on ${mode}: an unreachable port fails within the connect timeout`, async () => {
      const port = await unusedPort();
      const connectMs = 1000;
      const started = Date.now();
      await assert.rejects(
        createStore({
          client,
          mode,
          nodes: [{ host: '127.0.0.1', port }],
          timeouts: { connectMs },
        }),
        (err: Error) => err instanceof StoreConnectError && err.message.includes(String(port)),
      );
      // Generous slack for a loaded CI machine; the point is that it does not hang.
      assert.ok(Date.now() - started < connectMs + 2000, `took ${Date.now() - started} ms`);
    });
  }
});
