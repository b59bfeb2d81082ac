/**
 * Attack: a flood of distinct clients (here X-Forwarded-For through a trusted loopback proxy;
 * on the public edge, a botnet or an IPv6 range), each over its limit once, to grow every
 * per-client structure of the gateway. Each is bounded (limits.maxTrackedClients): the
 * structures hold at most that many clients, the gateway's memory after a full garbage
 * collection stays within a bound, and Valkey still judges every client exactly.
 *
 * The gateway is a real process (the `sluice bench clients` harness, smaller); the upstream is
 * a stub answering 200, since the relay's work is not what is measured.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { runClientsBench } from '../../src/bench/clients-bench.js';
import { standaloneNodes } from '../helpers/env.js';

const CLIENTS = 3000;
const MAX_TRACKED = 1000;

describe('a flood of distinct clients', { timeout: 90_000 }, () => {
  it('holds at most maxTrackedClients of them and its memory stays bounded', async () => {
    const r = await runClientsBench(
      {
        clients: CLIENTS,
        connections: 16,
        valkeyClient: 'iovalkey',
        valkey: standaloneNodes()[0]!,
        maxTrackedClients: MAX_TRACKED,
        settleSec: 0,
      },
      () => undefined,
    );
    assert.deepEqual(
      [r.admitted, r.refused, r.unexpected],
      [CLIENTS, CLIENTS, 0],
      'every client admitted once and refused once',
    );
    for (const structure of ['identity-keys', 'in-memory-blocks']) {
      assert.equal(r.tracked[structure], MAX_TRACKED, `${structure} holds the bound, no more`);
    }
    // Generous bounds: the structures hold under 1 MiB here, and V8's own sizing moves RSS
    // by a few MiB; a leak of 8 KiB or more per client fails them.
    assert.ok(
      r.rssAfterGcMiB - r.rssBeforeMiB < 24,
      `RSS grew from ${r.rssBeforeMiB.toFixed(1)} to ${r.rssAfterGcMiB.toFixed(1)} MiB`,
    );
    assert.ok(r.rssAfterGcMiB < 150, `RSS ${r.rssAfterGcMiB.toFixed(1)} MiB after a full GC`);
  });
});
