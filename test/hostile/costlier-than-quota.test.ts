/**
 * Invariant: a write (or read) whose cost is more than the whole quota of one it would be
 * charged to (its address, a range holding it, its author) is never told to retry: over HTTP
 * it is answered 403 (problem type urn:sluice:problem:cost-exceeds-quota) with no Retry-After,
 * RateLimit-Policy naming the quota it exceeds; over Nostr, an OK false that names no time. It
 * is refused before any charge, so the client's cheaper writes pass as before. Over raw
 * sockets, against a real gateway and Valkey.
 *
 * Mutations tried: httpVerdict without its quotaBelow check: the route's write is charged and
 * answered 429 with Retry-After (fails). WRITE_CHECKS without costFits: the event is charged,
 * refused after the fact (kept by the address's counter: its cheaper writes are refused), and
 * answered 429 over POST /events (fails).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { generateSecretKey } from 'nostr-tools/pure';
import { suiteRelayAndGateway } from '../helpers/gateway.js';
import { signedEvent } from '../helpers/nostr-events.js';
import { rawRequest } from '../helpers/raw-http.js';
import type { RawResponse } from '../helpers/raw-http.js';
import { RawNostr } from '../helpers/raw-nostr.js';

const WRITES = 10;
const READS = 30;
/** The /24's quota: fewer points than a /medium costs, over a shorter window. */
const PER_24 = 5;

describe('a request dearer than its whole quota, over raw sockets', { timeout: 120_000 }, () => {
  const suite = suiteRelayAndGateway({
    identity: { order: ['pubkey', 'ip'] },
    quotas: {
      keyPrefix: `costlier${Date.now().toString(36)}`,
      tiers: {
        default: {
          write: { points: WRITES, windowSec: 60 },
          read: { points: READS, windowSec: 60 },
        },
      },
      routes: [
        { path: '/bulk', class: 'write', cost: 2 * WRITES },
        { path: '/medium', class: 'write', cost: PER_24 + 1 },
        { path: '/export', class: 'read', cost: READS + 1 },
      ],
      ranges: {
        enabled: true,
        ipv4: [{ prefixLength: 24, write: { points: PER_24, windowSec: 10 } }],
      },
    },
    nostr: { costs: { kinds: { '30023': 2 * WRITES } } },
  });
  const gw = () => suite.gw();

  const request = (from: string, method: string, path: string, body = '{}') =>
    rawRequest(
      gw().url,
      `${method} ${path} HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
      from,
    );

  function neverPasses(r: RawResponse, quota: RegExp): void {
    assert.equal(r.status, 403, r.body);
    assert.equal(r.headers['retry-after'], undefined, 'no Retry-After: no wait lets it pass');
    const problem = JSON.parse(r.body) as { type: string; detail: string };
    assert.equal(problem.type, 'urn:sluice:problem:cost-exceeds-quota');
    assert.doesNotMatch(problem.detail, /retry in/);
    assert.match(problem.detail, /no retry passes/);
    assert.match(r.headers['ratelimit-policy'] ?? '', quota);
  }

  /** Cheap writes from `from` admitted, one after another, out of `n`. */
  async function cheapAdmitted(from: string, n: number): Promise<number> {
    let admitted = 0;
    for (let i = 0; i < n; i++) {
      if ((await request(from, 'POST', '/ingest')).status !== 429) admitted++;
    }
    return admitted;
  }

  it('HTTP: a route dearer than the address quota, the range or the read quota: 403', async () => {
    for (let i = 0; i < 3; i++) {
      neverPasses(await request('127.0.46.2', 'POST', '/bulk'), /^"writes";q=10;w=60$/);
    }
    neverPasses(await request('127.0.46.2', 'POST', '/medium'), /^"writes";q=5;w=10$/);
    neverPasses(await request('127.0.46.2', 'GET', '/export'), /^"reads";q=30;w=60$/);
    // Nothing was charged: the /24's whole write quota is still there for cheap writes.
    assert.equal(await cheapAdmitted('127.0.46.2', PER_24 + 1), PER_24);
  });

  it('Nostr: an event dearer than the whole quota names no retry time, and costs nothing', async () => {
    const client = await RawNostr.open(gw().url, '127.0.47.2');
    try {
      const costly = signedEvent(30023, 'a long article', generateSecretKey());
      client.send(['EVENT', costly]);
      const ok = await client.okFor(costly.id);
      assert.equal(ok[2], false);
      assert.equal(
        ok[3],
        'rate-limited: this write costs 20 points, more than the whole write quota of 10 per 60s; no retry passes',
      );
      // The same over POST /events: 403, no Retry-After.
      const posted = signedEvent(30023, 'the same, POSTed', generateSecretKey());
      const r = await request('127.0.47.2', 'POST', '/events', JSON.stringify(posted));
      neverPasses(r, /^"writes";q=10;w=60$/);
      // Nothing was charged: the /24's write quota is whole.
      assert.equal(await cheapAdmitted('127.0.47.2', PER_24 + 1), PER_24);
    } finally {
      client.close();
    }
  });
});
