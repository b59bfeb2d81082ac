/** Sticky routing: rendezvous hashing spreads clients evenly and moves only a lost node's. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { UpstreamPool } from '../src/gateway/upstreams.js';
import { clientKey } from '../src/store/keys.js';

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
});
