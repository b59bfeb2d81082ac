/**
 * Routing: sticky (rendezvous hashing spreads clients evenly and moves only a lost node's)
 * and headroom (power of two choices by multiplier, never a node at 0 while others can take
 * the write).
 *
 * A property failure prints fast-check's seed; replay it with SLUICE_PROPERTY_SEED=<seed>.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { MultiplierBoard } from '../../../src/pressure/follower/board.js';
import { UpstreamPool, pickByHeadroom } from '../../../src/gateway/upstreams.js';
import type { Headroom } from '../../../src/gateway/upstreams.js';
import { clientKey } from '../../../src/store/keys.js';
import { seededRandom } from '../../../src/util/random.js';
import { propertyParams } from '../../helpers/property-params.js';

const quiet = { info: () => undefined, warn: () => undefined };
const health = { path: '/healthz', intervalMs: 1000, timeoutMs: 500, failuresToDown: 2 };

function pool(ids: string[]): UpstreamPool {
  const upstreams = ids.map((id, i) => ({ id, url: `http://127.0.0.1:${7000 + i}` }));
  return new UpstreamPool(upstreams, 'sticky', health, quiet);
}

const clients = Array.from({ length: 9000 }, (_, i) => clientKey(`ip:10.${i >> 8}.${i & 255}.1`));

describe('sticky routing', { timeout: 30_000 }, () => {
  it('spreads clients evenly over the healthy nodes', () => {
    const p = pool(['relay-a', 'relay-b', 'relay-c']);
    const counts = new Map<string, number>();
    for (const c of clients) {
      const id = p.pick(c)!.id;
      counts.set(id, (counts.get(id) ?? 0) + 1);
    }
    for (const id of ['relay-a', 'relay-b', 'relay-c']) {
      const share = (counts.get(id) ?? 0) / clients.length;
      assert.ok(Math.abs(share - 1 / 3) < 0.03, `${id} has ${share.toFixed(3)} of the clients`);
    }
  });

  it('keeps every client on its node, and moves only the clients of a node that fails', () => {
    const p = pool(['relay-a', 'relay-b', 'relay-c']);
    const before = clients.map((c) => p.pick(c)!.id);
    assert.deepEqual(
      clients.map((c) => p.pick(c)!.id),
      before,
      'the same answer every time',
    );
    p.list().find((n) => n.id === 'relay-b')!.healthy = false;
    const after = clients.map((c) => p.pick(c)!.id);
    for (const [i, was] of before.entries()) {
      if (was === 'relay-b') assert.notEqual(after[i], 'relay-b');
      else assert.equal(after[i], was, 'a client of a healthy node stays');
    }
    const moved = after.filter((id, i) => before[i] === 'relay-b');
    const toA = moved.filter((id) => id === 'relay-a').length / moved.length;
    assert.ok(
      Math.abs(toA - 0.5) < 0.05,
      `relay-b's clients split evenly (${toA.toFixed(3)} to a)`,
    );
  });

  it('answers with the one node while it is healthy, and with none when it is not', () => {
    const p = pool(['relay-a']);
    assert.equal(p.pick(clients[0]!)!.id, 'relay-a');
    p.list()[0]!.healthy = false;
    assert.equal(p.pick(clients[0]!), undefined);
  });

  it("reads the client's hash only where it routes by it: sticky among several nodes", () => {
    const sticky = pool(['relay-a', 'relay-b', 'relay-c']);
    assert.equal(sticky.hashesClients(), true);
    const picked = new Set(clients.slice(0, 300).map((c) => sticky.pick(c)!.id));
    assert.equal(picked.size, 3, 'sticky routing spreads clients by their hash');
    const one = pool(['relay-a']);
    assert.equal(one.hashesClients(), false);
    assert.equal(one.pick('')!.id, 'relay-a');
    const upstreams = ['relay-a', 'relay-b'].map((id, i) => ({
      id,
      url: `http://127.0.0.1:${7000 + i}`,
    }));
    for (const routing of ['round-robin', 'headroom'] as const) {
      const p = new UpstreamPool(upstreams, routing, health, quiet);
      assert.equal(p.hashesClients(), false, routing);
      assert.ok(p.pick(''), routing);
    }
  });
});

/** Nodes n0..n(k-1) with these multipliers, and their headroom function. */
function fleet(ms: readonly number[]): { nodes: { id: string }[]; headroom: Headroom } {
  const nodes = ms.map((_, i) => ({ id: `n${i}` }));
  return { nodes, headroom: (id) => ms[Number(id.slice(1))]! };
}

/**
 * The exact share each node gets: pickByHeadroom run once for every pair of draws its
 * random source can make (k x (k - 1) equally likely ordered pairs of distinct nodes).
 */
function exactShares(ms: readonly number[]): number[] {
  const { nodes, headroom } = fleet(ms);
  const open = ms.some((m) => m > 0) ? ms.filter((m) => m > 0).length : ms.length;
  const counts = ms.map(() => 0);
  if (open === 1) {
    counts[Number(pickByHeadroom(nodes, headroom, () => 0)!.id.slice(1))]! += 1;
    return counts;
  }
  for (let i = 0; i < open; i++) {
    for (let j = 0; j < open - 1; j++) {
      const draws = [(i + 0.5) / open, (j + 0.5) / (open - 1)];
      const picked = pickByHeadroom(nodes, headroom, () => draws.shift()!)!;
      counts[Number(picked.id.slice(1))]! += 1;
    }
  }
  return counts.map((c) => c / (open * (open - 1)));
}

const grid = fc.integer({ min: 0, max: 20 }).map((n) => n / 20);

describe('headroom routing (power of two choices by multiplier)', { timeout: 30_000 }, () => {
  it('gives each node the share two random choices give it: the better of each pair wins', () => {
    // Three distinct multipliers: the best wins both of its pairs, the middle one, the worst none.
    assert.deepEqual(exactShares([1, 0.6, 0.3]), [2 / 3, 1 / 3, 0]);
    // Two healthy nodes tie and split; the sick one gets nothing while they have more room.
    assert.deepEqual(exactShares([1, 1, 0.25]), [0.5, 0.5, 0]);
    // All equal: an even spread.
    for (const share of exactShares([0.8, 0.8, 0.8, 0.8])) assert.equal(share, 0.25);
  });

  it('over generated multipliers: more headroom never gets less, equal gets equal, 0 gets nothing while another can take it', () => {
    fc.assert(
      fc.property(fc.array(grid, { minLength: 2, maxLength: 7 }), (ms) => {
        const shares = exactShares(ms);
        assert.ok(Math.abs(shares.reduce((a, b) => a + b, 0) - 1) < 1e-9, 'shares sum to 1');
        const anyOpen = ms.some((m) => m > 0);
        for (let i = 0; i < ms.length; i++) {
          if (anyOpen && ms[i] === 0) assert.equal(shares[i], 0, `n${i} at 0 is never chosen`);
          for (let j = 0; j < ms.length; j++) {
            if (ms[i]! > ms[j]! && ms[j]! > 0) assert.ok(shares[i]! > shares[j]!, `n${i} > n${j}`);
            if (ms[i] === ms[j]) assert.ok(Math.abs(shares[i]! - shares[j]!) < 1e-9);
          }
        }
        // The two-choices law: a node's share is the pairs it wins, a tie counting half.
        const open = anyOpen ? ms.filter((m) => m > 0) : ms;
        if (open.length < 2) return;
        const pairs = open.length * (open.length - 1);
        for (let i = 0; i < ms.length; i++) {
          if (anyOpen && ms[i] === 0) continue;
          const below = open.filter((m) => m < ms[i]!).length;
          const ties = open.filter((m) => m === ms[i]).length - 1;
          assert.ok(Math.abs(shares[i]! - (2 * below + ties) / pairs) < 1e-9, `n${i}'s share`);
        }
      }),
      propertyParams(300),
    );
  });

  it('routes through the pool by the board: each pick anew, never to a node at 0 or in emergency while others are healthy', () => {
    const ids = ['relay-a', 'relay-b', 'relay-c'];
    const board = new MultiplierBoard(ids);
    const upstreams = ids.map((id, i) => ({ id, url: `http://127.0.0.1:${7000 + i}` }));
    const p = new UpstreamPool(upstreams, 'headroom', health, quiet, {
      headroom: (id) => board.headroom(id),
      random: seededRandom(7),
    });
    const count = (picks: number) => {
      const counts = new Map<string, number>(ids.map((id) => [id, 0]));
      for (let i = 0; i < picks; i++) {
        const id = p.pick(clients[i % 10]!)!.id;
        counts.set(id, counts.get(id)! + 1);
      }
      return counts;
    };
    // All at 1: one client's writes spread evenly (each pick is a new choice).
    for (const n of count(3000).values()) assert.ok(Math.abs(n / 3000 - 1 / 3) < 0.04);

    board.setOverride('relay-c', 0);
    const zero = count(3000);
    assert.equal(zero.get('relay-c'), 0, 'the node at 0 takes nothing');
    assert.ok(Math.abs(zero.get('relay-a')! / 3000 - 0.5) < 0.04);

    board.setOverride('relay-c', null);
    board.setAdaptive(true);
    board.applyFeed('relay-b', 0.9, 'fresh', true);
    board.applyFeed('relay-a', 0.4, 'fresh', false);
    board.applyFeed('relay-c', 1, 'fresh', false);
    const weighted = count(3000);
    assert.equal(weighted.get('relay-b'), 0, 'in emergency: avoided whatever its multiplier');
    assert.ok(weighted.get('relay-c')! > weighted.get('relay-a')!, 'more headroom, more writes');

    p.list().find((n) => n.id === 'relay-c')!.healthy = false;
    const alone = count(300);
    assert.equal(alone.get('relay-a'), 300, 'the one healthy node with headroom takes all');
    board.applyFeed('relay-a', 0, 'fresh', false);
    assert.ok(p.pick(clients[0]!), 'with no headroom anywhere a healthy node still answers');
  });
});
