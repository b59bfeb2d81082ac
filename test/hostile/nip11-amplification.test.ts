/**
 * Attack 7 of issue 21: NIP-11 requests as a lever on the relay. Each request for the relay's
 * information document used to cost a fetch of its own (distinct query strings: 200 requests,
 * 200 fetches open at once, outside the node's pool), kept running after the client left.
 * Over raw sockets against a gateway before a stand-in relay that counts what it is asked
 * and sees which requests the gateway gave up on.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { RELAY_INFO_MAX_FETCHES } from '../../src/gateway/relay-info.js';
import { uniquePrefix } from '../helpers/env.js';
import { startGateway } from '../helpers/gateway.js';
import type { GatewayUnderTest } from '../helpers/gateway.js';
import { RawConnection, rawRequest } from '../helpers/raw-http.js';
import { inBatches, metricSum, metricsOf, waitFor } from '../helpers/raw-socket.js';
import { RecordingUpstream } from '../helpers/recording-upstream.js';

const CLIENTS = 200;
/** How soon a fetch nobody waits for must be cut (the fetch's own deadline is 5 s). */
const CANCELLED_WITHIN_MS = 2000;

function nip11Request(target: string): string {
  return `GET ${target} HTTP/1.1\r\nHost: relay.example\r\nAccept: application/nostr+json\r\n\r\n`;
}

describe('attack 7: NIP-11 fetch amplification', { timeout: 120_000 }, () => {
  let upstream: RecordingUpstream;
  let gw: GatewayUnderTest;
  const conns: RawConnection[] = [];

  before(async () => {
    upstream = await RecordingUpstream.start();
    gw = await startGateway('iovalkey', 'standalone', [{ id: 'stand-in', url: upstream.url }], {
      quotas: {
        keyPrefix: uniquePrefix('nip11-amp'),
        // A read quota far above the test's: its decisions show when a request was admitted.
        tiers: {
          default: {
            write: { points: 100, windowSec: 60 },
            read: { points: 100_000, windowSec: 60 },
          },
        },
      },
      // The fetch's own deadline is then RELAY_INFO_TIMEOUT_MS (5 s), not a shorter one.
      limits: { upstreamTimeoutMs: 30_000 },
    });
  });

  after(async () => {
    conns.forEach((c) => c.destroy());
    await gw?.proc.stop();
    await upstream?.close();
  });

  const fetchesOf = (path: string) => upstream.requests.filter((r) => r.url === path);
  const admittedReads = async () =>
    metricSum(await metricsOf(gw.adminUrl), 'sluice_decisions_total', {
      outcome: 'allowed',
      class: 'read',
    });

  /** Open `count` raw connections from distinct addresses, each sending one NIP-11 request. */
  async function ask(count: number, target: (i: number) => string, net: number) {
    const opened = await inBatches([...Array(count).keys()], 50, async (i) => {
      const conn = await RawConnection.open(gw.url, `127.0.${net}.${2 + (i % 250)}`);
      conn.write(nip11Request(target(i)));
      return conn;
    });
    conns.push(...opened);
    return opened;
  }

  it('200 requests with distinct query strings cost the relay one fetch', async () => {
    const before = await admittedReads();
    const clients = await ask(CLIENTS, (i) => `/held/amp?n=${i}&r=${Math.random()}`, 71);
    await waitFor(
      'every request admitted',
      async () => (await admittedReads()) - before >= CLIENTS,
    );
    assert.equal(fetchesOf('/held/amp').length, 1, 'one fetch, by path, whatever the query');
    assert.equal(
      upstream.requests.filter((r) => r.url.startsWith('/held/amp?')).length,
      0,
      'no query reaches the relay',
    );
    upstream.release();
    const answers = await Promise.all(clients.map((c) => c.response()));
    for (const res of answers) assert.equal(res.status, 200, res.body);
    assert.equal(fetchesOf('/held/amp').length, 1);
  });

  it("fetches over the node's pooled connections, not a connection of its own", async () => {
    // A proxied request (no NIP-11 Accept header) leaves its pooled connection idle, and the
    // fetch that follows takes it. A fetch on a connection of its own never rides one the
    // proxy used; the pool may open another when the first is not yet free: a few tries.
    const shared: boolean[] = [];
    for (let i = 0; i < 5 && !shared.includes(true); i++) {
      const plain = await rawRequest(
        gw.url,
        `GET /plain/${i} HTTP/1.1\r\nHost: relay.example\r\n\r\n`,
      );
      assert.equal(plain.status, 200);
      const [doc] = await ask(1, () => `/pooled/${i}`, 70);
      assert.equal((await doc!.response()).status, 200);
      const proxiedPorts = upstream.requests
        .filter((r) => r.url.startsWith('/plain/'))
        .map((r) => r.remotePort);
      shared.push(proxiedPorts.includes(upstream.last(`/pooled/${i}`)!.remotePort));
    }
    assert.ok(shared.includes(true), "a fetch took a connection of the proxy's pool");
  });

  it('200 distinct paths: at most RELAY_INFO_MAX_FETCHES fetches, the rest told to retry', async () => {
    const clients = await ask(CLIENTS, (i) => `/held/path-${i}?n=${i}`, 72);
    const statuses: number[] = [];
    const answered = clients.map((c) => c.response(20_000).then((r) => statuses.push(r.status)));
    await waitFor('the busy answers', () => statuses.length >= CLIENTS - RELAY_INFO_MAX_FETCHES);
    const fetched = upstream.requests.filter((r) => r.url.startsWith('/held/path-')).length;
    assert.ok(fetched <= RELAY_INFO_MAX_FETCHES, `${fetched} fetches reached the relay`);
    upstream.release();
    await Promise.all(answered);
    assert.equal(statuses.filter((s) => s === 503).length, CLIENTS - fetched, 'retry in 1 s');
    assert.equal(statuses.filter((s) => s === 200).length, fetched);
  });

  it('clients that leave get their fetch cancelled; a well-behaved client still gets the document', async () => {
    // Clients that ask and leave at once: whatever they started is cut, not left running.
    const rushing = await ask(40, (i) => `/held/rushed?n=${i}`, 74);
    rushing.forEach((c) => c.destroy());

    // A well-behaved client: its fetch is under way when the others arrive.
    const [patient] = await ask(1, () => '/held/shared', 73);
    await waitFor('its fetch at the relay', () => fetchesOf('/held/shared').length === 1);

    // Clients that wait until they are admitted (their fetch under way), then leave: half on
    // the patient client's path (sharing its fetch), half on a path of their own.
    const before = await admittedReads();
    const sharing = await ask(10, (i) => `/held/shared?n=${i}`, 75);
    const alone = await ask(10, (i) => `/held/waited?n=${i}`, 77);
    await waitFor(
      'the leaving requests admitted',
      async () => (await admittedReads()) - before >= 20,
    );
    assert.equal(fetchesOf('/held/waited').length, 1);
    const leftAt = Date.now();
    for (const c of [...sharing, ...alone]) c.destroy();
    await waitFor(
      'the fetch nobody waits for cut at the relay',
      () => fetchesOf('/held/waited').every((r) => r.abandoned),
      CANCELLED_WITHIN_MS,
    );
    assert.ok(Date.now() - leftAt < CANCELLED_WITHIN_MS);
    await waitFor(
      'the fetches of the clients that left at once cut too',
      () => fetchesOf('/held/rushed').every((r) => r.abandoned),
      CANCELLED_WITHIN_MS,
    );

    // The patient client's fetch, shared with clients that left, was not cancelled.
    assert.equal(fetchesOf('/held/shared').length, 1);
    assert.equal(fetchesOf('/held/shared')[0]!.abandoned, undefined, 'still running');
    upstream.release();
    const res = await patient!.response();
    assert.equal(res.status, 200, res.body);
    assert.equal(
      (JSON.parse(res.body) as { url: string }).url,
      '/held/shared',
      "the relay's document",
    );

    // The next client after a cancelled fetch is served (by a fetch of its own).
    const [next] = await ask(1, () => '/held/waited?again', 76);
    await waitFor('its fetch at the relay', () => fetchesOf('/held/waited').length === 2);
    upstream.release();
    assert.equal((await next!.response()).status, 200);
  });
});
