import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { finalizeEvent, generateSecretKey, getPublicKey } from 'nostr-tools/pure';
import type { Event } from 'nostr-tools/pure';
import { matrix } from './helpers/env.js';
import { NostrClient, admin, request, startGateway } from './helpers/gateway.js';
import type { GatewayUnderTest } from './helpers/gateway.js';
import { startRelay } from './helpers/processes.js';
import type { SluiceProcess } from './helpers/processes.js';

/** A fresh author for each test, so counts at the relays belong to that test alone. */
function author() {
  const sk = generateSecretKey();
  return {
    pubkey: getPublicKey(sk),
    event: (i: number): Event =>
      finalizeEvent(
        { kind: 1, created_at: Math.floor(Date.now() / 1000) - i, tags: [], content: `note ${i}` },
        sk,
      ),
  };
}

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

let source = 1;
/** A loopback address no other test has used: a client of its own. */
function freshClientAddress(): string {
  source++;
  return `127.0.${Math.floor(source / 250)}.${(source % 250) + 2}`;
}

for (const { client, mode } of matrix()) {
  describe(`gateway with ${client} on ${mode}`, { timeout: 120_000 }, () => {
    let gw: GatewayUnderTest;
    before(async () => {
      // Each combination gets its own counters: a prefix of its own.
      const settings = structuredClone(WRITES_10_PER_10S);
      settings.quotas.keyPrefix += `-${client}-${mode}`;
      gw = await startGateway(client, mode, upstreams, settings);
    });
    after(async () => {
      assert.equal(await gw.proc.stop(), 0, 'the gateway exits cleanly on SIGTERM');
    });

    it('HTTP: 10 of 15 writes reach the relay, 5 get 429 with rate-limit headers', async () => {
      const from = freshClientAddress();
      const a = author();
      const results = [];
      for (let i = 0; i < 15; i++) {
        results.push(
          await request(`${gw.url}/events`, {
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

    it('HTTP: a client over its limit is turned away from memory, with no Valkey call', async () => {
      const from = freshClientAddress();
      const a = author();
      for (let i = 0; i < 11; i++) {
        await request(`${gw.url}/events`, {
          method: 'POST',
          body: JSON.stringify(a.event(i)),
          from,
        });
      }
      const calls = async () =>
        (await request(`${gw.adminUrl}/metrics`)).body
          .split('\n')
          .filter((l) => l.startsWith('sluice_valkey_call_seconds_count'))
          .reduce((sum, l) => sum + Number(l.split(' ').pop()), 0);
      const before = await calls();
      for (let i = 11; i < 16; i++) {
        const res = await request(`${gw.url}/events`, {
          method: 'POST',
          body: JSON.stringify(a.event(i)),
          from,
        });
        assert.equal(res.status, 429);
        assert.ok(Number(res.headers['retry-after']) >= 1);
      }
      assert.equal(
        await calls(),
        before,
        'rejections of a blocked client cost no Valkey round trip',
      );
    });

    it('HTTP: reads are not charged, and two clients are independent', async () => {
      const first = freshClientAddress();
      const second = freshClientAddress();
      const a = author();
      for (let i = 0; i < 10; i++) {
        await request(`${gw.url}/events`, {
          method: 'POST',
          body: JSON.stringify(a.event(i)),
          from: first,
        });
      }
      for (let i = 0; i < 5; i++) {
        const read = await request(`${gw.url}/events?authors=${a.pubkey}`, { from: first });
        assert.equal(read.status, 200);
      }
      const over = await request(`${gw.url}/events`, {
        method: 'POST',
        body: JSON.stringify(a.event(10)),
        from: first,
      });
      assert.equal(over.status, 429);
      const other = await request(`${gw.url}/events`, {
        method: 'POST',
        body: JSON.stringify(a.event(11)),
        from: second,
      });
      assert.equal(other.status, 200);
      assert.match(String(other.headers.ratelimit), /r=9;/);
    });

    it('HTTP: an API key maps to its tier and its own limit', async () => {
      const from = freshClientAddress();
      const a = author();
      const statuses = [];
      for (let i = 0; i < 22; i++) {
        const res = await request(`${gw.url}/events`, {
          method: 'POST',
          body: JSON.stringify(a.event(i)),
          headers: { 'x-api-key': 'premium-key-1' },
          from,
        });
        statuses.push(res.status);
      }
      assert.equal(statuses.filter((s) => s === 200).length, 20);
      assert.equal(statuses.filter((s) => s === 429).length, 2);
    });

    it('HTTP: a spoofed X-Forwarded-For from an untrusted peer does not change the identity', async () => {
      const from = freshClientAddress();
      const a = author();
      const statuses = [];
      for (let i = 0; i < 12; i++) {
        const res = await request(`${gw.url}/events`, {
          method: 'POST',
          body: JSON.stringify(a.event(i)),
          headers: { 'x-forwarded-for': `198.51.100.${i}` },
          from,
        });
        statuses.push(res.status);
      }
      assert.deepEqual(statuses.slice(10), [429, 429]);
    });

    it('Nostr: 10 of 15 EVENTs get OK true from the relay, 5 get rate-limited from the gateway', async () => {
      const nostr = await NostrClient.connect(gw.url, freshClientAddress());
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

    it('Nostr: malformed and oversized frames are answered; the connection and gateway survive', async () => {
      const nostr = await NostrClient.connect(gw.url, freshClientAddress());
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

    it('a multiplier of 0.5 from the admin endpoint halves the limit at once, and shows in headers', async () => {
      const denied = await admin(
        gw,
        'POST',
        '/admin/flow-control',
        { nodes: { 'relay-a': { multiplier: 0.5 } } },
        '',
      );
      assert.equal(denied.status, 401);
      const set = await admin(gw, 'POST', '/admin/flow-control', {
        nodes: { 'relay-a': { multiplier: 0.5 }, 'relay-b': { multiplier: 0.5 } },
      });
      assert.equal(set.status, 200, set.body);
      try {
        const from = freshClientAddress();
        const a = author();
        const results = [];
        for (let i = 0; i < 8; i++) {
          results.push(
            await request(`${gw.url}/events`, {
              method: 'POST',
              body: JSON.stringify(a.event(i)),
              from,
            }),
          );
        }
        assert.equal(results[0]!.headers['ratelimit-policy'], '"writes";q=5;w=10');
        assert.equal(results.filter((r) => r.status === 200).length, 5);
        const state = JSON.parse((await admin(gw, 'GET', '/admin/flow-control')).body) as {
          nodes: Record<string, { multiplier: number; source: string }>;
        };
        assert.deepEqual(state.nodes['relay-a'], {
          ...state.nodes['relay-a'],
          multiplier: 0.5,
          source: 'admin',
        });
      } finally {
        await admin(gw, 'POST', '/admin/flow-control', {
          nodes: { 'relay-a': { multiplier: 1 }, 'relay-b': { multiplier: 1 } },
        });
      }
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
          const target = i % 2 === 0 ? gw.url : second.url;
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
