/**
 * NIP-11 through the gateway: a GET with `Accept: application/nostr+json` gets the relay's
 * information document with the gateway's limits merged into `limitation`, its CORS headers,
 * cached briefly; a relay that fails, stalls or sends too much gives a clear 502. Against a
 * reference relay process, and a stand-in relay for the failures (the merge alone, in
 * process: test/unit/nostr/relay-info.test.ts).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { NODE_BUDGET_KEY, WRITE_QUOTA_KEY } from '../../src/nostr/relay-info-document.js';
import { RELAY_INFO_MAX_BYTES, RELAY_INFO_MAX_FETCHES } from '../../src/gateway/relay-info.js';
import { uniquePrefix } from '../helpers/env.js';
import { admin, request, startGateway, suiteRelayAndGateway } from '../helpers/gateway.js';
import type { GatewayUnderTest } from '../helpers/gateway.js';
import { RecordingUpstream } from '../helpers/recording-upstream.js';
import { metricSum } from '../helpers/raw-socket.js';

const NOSTR_JSON = { accept: 'application/nostr+json' };

interface InfoDoc {
  name: string;
  supported_nips: number[];
  limitation: Record<string, unknown>;
  [WRITE_QUOTA_KEY]?: Quota;
  [NODE_BUDGET_KEY]?: Quota & { in_force: boolean };
}

interface Quota {
  points: number;
  window_sec: number;
  base_points: number;
  multiplier: number;
}

describe('NIP-11 from the gateway, before a reference relay', { timeout: 120_000 }, () => {
  // The relay allows 64 KiB messages (twice --max-event-bytes, at least 64 KiB); the gateway 32 KiB.
  const suite = suiteRelayAndGateway(
    {
      quotas: {
        keyPrefix: uniquePrefix('nip11'),
        tiers: { default: { write: { points: 7, windowSec: 60 } } },
      },
      limits: { maxFrameBytes: 32 * 1024 },
      // The write policy a relay operator sets at the gateway, advertised with the relay's.
      nostr: {
        publicUrl: 'wss://relay.example.org/',
        authRequiredForWrites: true,
        pow: { minDifficulty: 8 },
        maxSubscriptions: 3,
      },
    },
    ['--max-event-bytes', '16384'],
    { writeBudget: { points: 50 } },
  );

  it("merges the gateway's frame bound and write quota into the relay's document, with CORS", async () => {
    const direct = await request(suite.relay().url, { headers: NOSTR_JSON });
    const relayDoc = JSON.parse(direct.body) as InfoDoc;
    assert.equal(relayDoc.limitation.max_message_length, 64 * 1024);

    const res = await request(`${suite.gw().url}/`, { headers: NOSTR_JSON });
    assert.equal(res.status, 200, res.body);
    assert.match(String(res.headers['content-type']), /^application\/nostr\+json/);
    assert.equal(res.headers['access-control-allow-origin'], '*');
    const doc = JSON.parse(res.body) as InfoDoc;
    assert.equal(doc.name, relayDoc.name, "the relay's own fields are kept");
    assert.deepEqual(doc.supported_nips, relayDoc.supported_nips);
    assert.equal(doc.limitation.max_message_length, 32 * 1024, 'the smaller bound');
    assert.equal(
      doc.limitation.max_subscriptions,
      Math.min(3, Number(relayDoc.limitation.max_subscriptions ?? Infinity)),
    );
    assert.equal(doc.limitation.min_pow_difficulty, 8);
    assert.equal(doc.limitation.auth_required, true, 'writes need AUTH at the gateway');
    assert.equal(doc.limitation.restricted_writes, true);
    assert.deepEqual(doc[WRITE_QUOTA_KEY], {
      points: 7,
      window_sec: 60,
      base_points: 7,
      multiplier: 1,
    });
    assert.deepEqual(doc[NODE_BUDGET_KEY], {
      points: 50,
      window_sec: 1,
      base_points: 50,
      multiplier: 1,
      in_force: false,
    });
  });

  it("carries the quota in force under pressure, at once, though the relay's document is cached", async () => {
    const nip11 = async () => {
      const res = await request(`${suite.gw().url}/`, { headers: NOSTR_JSON });
      assert.equal(res.status, 200, res.body);
      return JSON.parse(res.body) as InfoDoc;
    };
    await nip11(); // the relay's document is now cached for a few seconds
    const set = (multiplier: number | null) =>
      admin(suite.gw(), 'POST', '/admin/flow-control', { nodes: { 'relay-a': { multiplier } } });
    assert.equal((await set(0.5)).status, 200);
    try {
      const doc = await nip11();
      assert.deepEqual(doc[WRITE_QUOTA_KEY], {
        points: 3,
        window_sec: 60,
        base_points: 7,
        multiplier: 0.5,
      });
      assert.deepEqual(doc[NODE_BUDGET_KEY], {
        points: 25,
        window_sec: 1,
        base_points: 50,
        multiplier: 0.5,
        in_force: true,
      });
    } finally {
      assert.equal((await set(null)).status, 200);
    }
    assert.equal((await nip11())[WRITE_QUOTA_KEY]?.points, 7, 'back to the base at once');
  });

  it('leaves other requests alone: a plain GET is the relay answering, a denied path stays 404', async () => {
    const plain = await request(`${suite.gw().url}/`);
    assert.equal(plain.status, 200);
    assert.match(plain.body, /speak Nostr/);
    const denied = await request(`${suite.gw().url}/admin/drain`, { headers: NOSTR_JSON });
    assert.equal(denied.status, 404);
  });
});

describe('NIP-11 from the gateway, before a relay that misbehaves', { timeout: 60_000 }, () => {
  let upstream: RecordingUpstream;
  let gw: GatewayUnderTest;

  before(async () => {
    upstream = await RecordingUpstream.start();
    gw = await startGateway('iovalkey', 'standalone', [{ id: 'stand-in', url: upstream.url }], {
      quotas: { keyPrefix: uniquePrefix('nip11-bad') },
      limits: { upstreamTimeoutMs: 1000 },
    });
  });

  after(async () => {
    await gw?.proc.stop();
    await upstream?.close();
  });

  const fetchesOf = (path: string) =>
    upstream.requests.filter((r) => r.url === path && r.headers.accept === NOSTR_JSON.accept)
      .length;

  it('fetches once for many clients within the cache time', async () => {
    const answers = await Promise.all(
      Array.from({ length: 20 }, () => request(`${gw.url}/cached`, { headers: NOSTR_JSON })),
    );
    for (const res of answers) assert.equal(res.status, 200, res.body);
    assert.equal(fetchesOf('/cached'), 1);
  });

  it('fetches by path: distinct query strings share one fetch', async () => {
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        request(`${gw.url}/queried?n=${i}`, { headers: NOSTR_JSON }),
      ),
    );
    for (const res of answers) assert.equal(res.status, 200, res.body);
    assert.equal(fetchesOf('/queried'), 1, 'fetched once, without the query');
  });

  it('holds at most RELAY_INFO_MAX_FETCHES fetches open; past it, 503 at once', async () => {
    const answers = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        request(`${gw.url}/hang/${i}?n=${i}`, { headers: NOSTR_JSON }),
      ),
    );
    const opened = upstream.requests.filter((r) => r.url.startsWith('/hang/')).length;
    assert.ok(opened <= RELAY_INFO_MAX_FETCHES, `${opened} fetches reached the relay`);
    const busy = answers.filter((r) => r.status === 503);
    assert.equal(busy.length, 40 - opened, 'the others are told to come back');
    assert.equal(busy[0]?.headers['retry-after'], '1');
  });

  it('a relay that does not answer in time: 502 naming the timeout', async () => {
    const started = Date.now();
    const res = await request(`${gw.url}/hang`, { headers: NOSTR_JSON });
    assert.equal(res.status, 502);
    assert.match(res.body, /did not answer within 1000 ms/);
    assert.ok(Date.now() - started < 10_000);
    assert.equal(res.headers['access-control-allow-origin'], '*', 'a browser can read why');
  });

  it('a document past the size bound, or not JSON: 502, and the gateway keeps serving', async () => {
    const huge = await request(`${gw.url}/huge`, { headers: NOSTR_JSON });
    assert.equal(huge.status, 502);
    assert.match(huge.body, new RegExp(`exceeds ${RELAY_INFO_MAX_BYTES} bytes`));
    const html = await request(`${gw.url}/not-json`, { headers: NOSTR_JSON });
    assert.equal(html.status, 502);
    assert.match(html.body, /not JSON/);
    const failing = await request(`${gw.url}/status-500`, { headers: NOSTR_JSON });
    assert.equal(failing.status, 502);
    assert.match(failing.body, /answered 500/);
    const ok = await request(`${gw.url}/fine`, { headers: NOSTR_JSON });
    assert.equal(ok.status, 200);
    assert.equal((await request(`${gw.adminUrl}/readyz`)).status, 200);
    // The bodies dropped unread raised nothing the last-resort handler had to catch.
    const metrics = await admin(gw, 'GET', '/metrics');
    assert.equal(metricSum(metrics.body, 'sluice_internal_errors_total'), 0, metrics.body);
  });
});
