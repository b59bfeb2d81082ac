/**
 * A load's bodies: each client sends the pool's events in turn, so no client sends again,
 * before the pool runs out, an event it was refused (which the gateway holds as an early
 * retry). Mutation tried: drawing by request index (the load before) fails the first test.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { clientBodies, clientOfHeaders } from '../../../src/bench/run/client-bodies.js';

describe('bodies per client', { timeout: 10_000 }, () => {
  it('never repeats a body for one client before the pool is spent, whatever others send', () => {
    const pool = ['a', 'b', 'c', 'd'];
    const bodyFor = clientBodies(pool);
    const seen = new Map<string, string[]>();
    // Two clients interleaved unevenly, as a Zipf draw sends them.
    for (const client of ['x', 'y', 'x', 'x', 'y', 'x']) {
      const sent = seen.get(client) ?? [];
      sent.push(bodyFor(client));
      seen.set(client, sent);
    }
    assert.deepEqual(seen.get('x'), ['a', 'b', 'c', 'd']);
    assert.deepEqual(seen.get('y'), ['a', 'b']);
    assert.equal(bodyFor('x'), 'a', 'past the pool, a client starts it again');
  });

  it('names a client by the address the gateway charges, else its API key', () => {
    assert.equal(clientOfHeaders({ 'x-forwarded-for': '10.0.0.1', 'x-api-key': 'k' }), '10.0.0.1');
    assert.equal(clientOfHeaders({ 'x-api-key': 'k' }), 'k');
    assert.throws(() => clientBodies([])('x'), /no bodies/);
  });
});
