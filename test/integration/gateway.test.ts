import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { finalizeEvent, generateSecretKey } from 'nostr-tools/pure';
import { matrix } from '../helpers/env.js';
import type { ClientKind, Topology } from '../../src/store/index.js';
import { addressSource, freshAuthor } from '../helpers/clients.js';
import { NostrClient, request, startGateway } from '../helpers/gateway.js';
import type { GatewayUnderTest } from '../helpers/gateway.js';
import { startRelay } from '../helpers/processes.js';
import type { SluiceProcess } from '../helpers/processes.js';

const author = freshAuthor;

let relays: SluiceProcess[] = [];
let upstreams: { id: string; url: string }[] = [];

/** How many events of one author the relays hold, asked of the relays directly. */
async function storedBy(pubkey: string): Promise<number> {
  let total = 0;
  for (const relay of relays) {
    const res = await request(`${relay.url}/events?authors=${pubkey}&limit=1000`);
    total += (JSON.parse(res.body) as unknown[]).length;
  }
  return total;
}

const WRITES_10_PER_10S = {
  quotas: {
    keyPrefix: `t${Date.now().toString(36)}`,
    tiers: {
      default: { write: { points: 10, windowSec: 10 } },
      premium: { write: { points: 20, windowSec: 10 } },
    },
    apiKeys: { 'premium-key-1': 'premium' },
  },
  limits: { maxFrameBytes: 16 * 1024 },
};

before(async () => {
  relays = await Promise.all([
    startRelay({ nodeId: 'relay-a' }),
    startRelay({ nodeId: 'relay-b' }),
  ]);
  upstreams = relays.map((r, i) => ({ id: i === 0 ? 'relay-a' : 'relay-b', url: r.url }));
});

after(async () => {
  await Promise.all(relays.map((r) => r.stop()));
});

/** A loopback address no other test has used: a client of its own. */
const freshClientAddress = addressSource(0);

/** A gateway process per describe, with counters of its own, stopped (cleanly) after it. */
function gatewayFor(client: ClientKind, mode: Topology): () => GatewayUnderTest {
  let gw: GatewayUnderTest;
  before(async () => {
    const settings = structuredClone(WRITES_10_PER_10S);
    settings.quotas.keyPrefix += `-${client}-${mode}`;
    gw = await startGateway(client, mode, upstreams, settings);
  });
  after(async () => {
    assert.equal(await gw.proc.stop(), 0, 'the gateway exits cleanly on SIGTERM');
  });
  return () => gw;
}

// What goes through the Valkey client: every client on both topologies. The HTTP proxy's
// other behaviour is in http-proxy.test.ts (in process, through inject).
for (const { client, mode } of matrix()) {
  describe(`gateway with ${client} on ${mode}`, { timeout: 120_000 }, () => {
    const gw = gatewayFor(client, mode);

    it('HTTP: 10 of 15 writes reach the relay, 5 get 429 with rate-limit headers', async () => {
      const from = freshClientAddress();
      const a = author();
      const results = [];
      for (let i = 0; i < 15; i++) {
        results.push(
          await request(`${gw().url}/events`, {
            method: 'POST',
            body: JSON.stringify(a.event(i)),
            from,
          }),
        );
      }
      assert.deepEqual(
        results.map((r) => r.status),
        [...Array<number>(10).fill(200), ...Array<number>(5).fill(429)],
      );
      assert.equal(results[0]!.headers['ratelimit-policy'], '"writes";q=10;w=10');
      assert.match(String(results[0]!.headers.ratelimit), /^"writes";r=9;t=\d+$/);
      const rejected = results[14]!;
      assert.match(String(rejected.headers.ratelimit), /^"writes";r=0;t=\d+$/);
      assert.ok(Number(rejected.headers['retry-after']) >= 1);
      assert.match(String(rejected.headers['content-type']), /application\/problem\+json/);
      assert.equal((JSON.parse(rejected.body) as { status: number }).status, 429);
      assert.equal(await storedBy(a.pubkey), 10, 'rejected writes never reach a relay');
    });

    it('Nostr: 10 of 15 EVENTs get OK true from the relay, 5 get rate-limited from the gateway', async () => {
      const nostr = await NostrClient.connect(gw().url, freshClientAddress());
      const a = author();
      const events = Array.from({ length: 15 }, (_, i) => a.event(i));
      for (const ev of events) nostr.send(['EVENT', ev]);
      await nostr.until((msgs) => msgs.filter((m) => m[0] === 'OK').length >= 15);
      const oks = nostr.oks();
      assert.equal(oks.length, 15, 'every EVENT is answered');
      assert.deepEqual(
        new Set(oks.map((m) => m[1])),
        new Set(events.map((e) => e.id)),
        'each answered once, by id',
      );
      assert.equal(oks.filter((m) => m[2] === true).length, 10);
      const limited = oks.filter((m) => m[2] === false);
      assert.equal(limited.length, 5);
      for (const m of limited) assert.match(String(m[3]), /^rate-limited: /);

      nostr.send(['REQ', 'mine', { authors: [a.pubkey] }]);
      await nostr.until((msgs) => msgs.some((m) => m[0] === 'EOSE' && m[1] === 'mine'));
      const stored = nostr.received.filter((m) => m[0] === 'EVENT' && m[1] === 'mine');
      assert.equal(stored.length, 10);
      nostr.close();
    });

    it('two gateway processes on one Valkey enforce one shared quota', async () => {
      const settings = structuredClone(WRITES_10_PER_10S);
      settings.quotas.keyPrefix += `-${client}-${mode}`;
      const second = await startGateway(client, mode, upstreams, settings);
      try {
        const from = freshClientAddress();
        const a = author();
        let admitted = 0;
        for (let i = 0; i < 20; i++) {
          const target = i % 2 === 0 ? gw().url : second.url;
          const res = await request(`${target}/events`, {
            method: 'POST',
            body: JSON.stringify(a.event(i)),
            from,
          });
          if (res.status === 200) admitted++;
        }
        assert.equal(admitted, 10);
        assert.equal(await storedBy(a.pubkey), 10);
      } finally {
        await second.proc.stop();
      }
    });
  });
}

// Frame handling does not depend on the client: one gateway process, over a real socket.
describe('gateway frames (iovalkey on standalone)', { timeout: 60_000 }, () => {
  const gw = gatewayFor('iovalkey', 'standalone');

  it('Nostr: malformed and oversized frames are answered; the connection and gateway survive', async () => {
    const nostr = await NostrClient.connect(gw().url, freshClientAddress());
    const a = author();
    nostr.send('this is not json');
    // Built once: a.event() stamps the current second, so a second call may differ.
    const forged = { ...a.event(1), sig: '00'.repeat(64) };
    nostr.send(['EVENT', forged]);
    const big = finalizeEvent(
      { kind: 1, created_at: 1, tags: [], content: 'x'.repeat(20_000) },
      generateSecretKey(),
    );
    nostr.send(['EVENT', big]);
    const good = a.event(2);
    nostr.send(['EVENT', good]);
    const findBad = () =>
      nostr
        .oks()
        .find((m) => m[1] === forged.id || (m[2] === false && /signature/.test(String(m[3]))));
    // Every frame answered (in whatever order the checks finish), then each answer checked.
    await nostr.until(
      (msgs) =>
        msgs.some((m) => m[0] === 'NOTICE') &&
        findBad() !== undefined &&
        [big.id, good.id].every((id) => msgs.some((m) => m[0] === 'OK' && m[1] === id)),
    );
    assert.ok(nostr.received.some((m) => m[0] === 'NOTICE' && /^invalid: /.test(String(m[1]))));
    assert.ok(findBad(), 'the bad signature is answered with OK false invalid:');
    const oversized = nostr.oks().find((m) => m[1] === big.id);
    assert.ok(
      oversized && oversized[2] === false && /^invalid: .*exceeds/.test(String(oversized[3])),
    );
    assert.deepEqual(nostr.oks().find((m) => m[1] === good.id)?.[2], true);
    nostr.close();
  });
});
