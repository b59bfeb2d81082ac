/**
 * Shadow mode (quotas.mode: shadow, or a tier's mode): decisions are computed, counted
 * (outcome="shadow_limited"), logged (sampled) and sent in headers, and nothing is refused.
 * A gateway process in front of a reference relay, over real sockets (the log's sampling,
 * in process: test/unit/util/shadow-mode.test.ts).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Event } from 'nostr-tools/pure';
import {
  NostrClient,
  admin,
  metricValue,
  request,
  suiteRelayAndGateway,
} from '../helpers/gateway.js';
import { addressSource, freshAuthor, storedAt } from '../helpers/clients.js';
import { uniquePrefix } from '../helpers/env.js';

const PREMIUM_KEY = 'shadow-premium-key-1';
const suite = suiteRelayAndGateway({
  quotas: {
    keyPrefix: uniquePrefix('shadow'),
    mode: 'shadow',
    tiers: {
      default: { write: { points: 3, windowSec: 60 } },
      premium: { write: { points: 3, windowSec: 60 }, mode: 'shadow' },
    },
    apiKeys: { [PREMIUM_KEY]: 'premium' },
  },
  // The sender alone: each write is one decision, so the counts below are exact.
  identity: { order: ['apiKey', 'ip'] },
  logging: { level: 'info' },
});
const gw = () => suite.gw();

const freshClientAddress = addressSource(3);
const author = freshAuthor;
const storedBy = (pubkey: string) => storedAt(suite.relay().url, pubkey);

function post(from: string, event: Event, headers: Record<string, string> = {}) {
  return request(`${gw().url}/events`, {
    method: 'POST',
    body: JSON.stringify(event),
    from,
    headers,
  });
}

const SHADOW_WRITES = 'outcome="shadow_limited",class="write",node="relay-a"';
const LIMITED_WRITES = 'outcome="limited",class="write",node="relay-a"';

async function setMode(body: unknown): Promise<void> {
  const res = await admin(gw(), 'POST', '/admin/flow-control', body);
  assert.equal(res.status, 200, res.body);
}

describe('shadow mode', { timeout: 120_000 }, () => {
  it('HTTP: a client over its limit gets every write through, r=0 in its headers, counted shadow_limited', async () => {
    await setMode({ mode: 'shadow' });
    const shadowBefore = await metricValue(gw(), 'sluice_decisions_total', SHADOW_WRITES);
    const from = freshClientAddress();
    const a = author();
    const results = [];
    for (let i = 0; i < 6; i++) results.push(await post(from, a.event(i)));
    assert.deepEqual(
      results.map((r) => r.status),
      [200, 200, 200, 200, 200, 200],
    );
    for (const over of results.slice(3)) {
      assert.match(String(over.headers.ratelimit), /^"writes";r=0;t=\d+$/);
      assert.equal(over.headers['ratelimit-policy'], '"writes";q=3;w=60');
      assert.equal(over.headers['retry-after'], undefined, 'nothing refused, nothing to retry');
    }
    assert.equal(await storedBy(a.pubkey), 6, 'every write reached the relay');
    const shadowAfter = await metricValue(gw(), 'sluice_decisions_total', SHADOW_WRITES);
    assert.equal(shadowAfter - shadowBefore, 3);
  });

  it('Nostr: EVENTs over the limit are forwarded and answered OK true by the relay', async () => {
    await setMode({ mode: 'shadow' });
    const shadowBefore = await metricValue(gw(), 'sluice_decisions_total', SHADOW_WRITES);
    const nostr = await NostrClient.connect(gw().url, freshClientAddress());
    try {
      const a = author();
      const events = Array.from({ length: 5 }, (_, i) => a.event(i));
      for (const ev of events) nostr.send(['EVENT', ev]);
      await nostr.until((msgs) => msgs.filter((m) => m[0] === 'OK').length >= 5);
      assert.deepEqual(
        nostr.oks().map((m) => m[2]),
        [true, true, true, true, true],
      );
      assert.equal(await storedBy(a.pubkey), 5);
    } finally {
      nostr.close();
    }
    const shadowAfter = await metricValue(gw(), 'sluice_decisions_total', SHADOW_WRITES);
    assert.equal(shadowAfter - shadowBefore, 2);
  });

  it('logs what it would have refused at a sampled rate, by hashed identity', async () => {
    await setMode({ mode: 'shadow' });
    const from = freshClientAddress();
    const a = author();
    for (let i = 0; i < 10; i++) assert.equal((await post(from, a.event(i))).status, 200);
    const lines = gw()
      .proc.output()
      .split('\n')
      .filter((l) => l.includes('shadow mode: would have refused'))
      .map((l) => JSON.parse(l) as { shadowLimited: number; key: string; tier: string });
    const shadowed = await metricValue(gw(), 'sluice_decisions_total', SHADOW_WRITES);
    assert.ok(lines.length >= 1, 'at least the first one is logged');
    assert.ok(lines.length < shadowed, `${lines.length} lines for ${shadowed} decisions`);
    const counted = lines.reduce((sum, l) => sum + l.shadowLimited, 0);
    assert.ok(counted <= shadowed, 'each line counts only decisions that happened');
    assert.ok(!gw().proc.output().includes(from), 'the client address is never logged');
    assert.match(lines[0]!.key, /^\{[A-Za-z0-9_-]{22}\}$/);
  });

  it('switching to enforce through the admin endpoint (token required) refuses at once', async () => {
    await setMode({ mode: 'shadow' });
    const from = freshClientAddress();
    const a = author();
    for (let i = 0; i < 4; i++) assert.equal((await post(from, a.event(i))).status, 200);
    const unauthorised = await admin(gw(), 'POST', '/admin/flow-control', { mode: 'enforce' }, '');
    assert.equal(unauthorised.status, 401);
    assert.equal((await post(from, a.event(4))).status, 200, 'still shadow without the token');

    const limitedBefore = await metricValue(gw(), 'sluice_decisions_total', LIMITED_WRITES);
    await setMode({ mode: 'enforce' });
    const state = await admin(gw(), 'GET', '/admin/flow-control');
    assert.equal((JSON.parse(state.body) as { quotas: { mode: string } }).quotas.mode, 'enforce');
    const refused = await post(from, a.event(5));
    assert.equal(refused.status, 429);
    assert.ok(Number(refused.headers['retry-after']) >= 1);
    const nostr = await NostrClient.connect(gw().url, from);
    try {
      const ev = a.event(6);
      nostr.send(['EVENT', ev]);
      await nostr.until((msgs) => msgs.some((m) => m[0] === 'OK'));
      assert.equal(nostr.oks()[0]![2], false);
      assert.match(String(nostr.oks()[0]![3]), /^rate-limited: /);
    } finally {
      nostr.close();
    }
    assert.equal(await storedBy(a.pubkey), 5, 'nothing refused reached the relay');
    const limitedAfter = await metricValue(gw(), 'sluice_decisions_total', LIMITED_WRITES);
    assert.equal(limitedAfter - limitedBefore, 2);
  });

  it("a tier's own mode overrides the global one, and the admin endpoint can change or clear it", async () => {
    await setMode({ mode: 'enforce' });
    const premium = { 'x-api-key': PREMIUM_KEY };
    const a = author();
    const from = freshClientAddress();
    const statuses = [];
    for (let i = 0; i < 5; i++) statuses.push((await post(from, a.event(i), premium)).status);
    assert.deepEqual(statuses, [200, 200, 200, 200, 200], 'premium is in shadow mode');
    const other = freshClientAddress();
    const plain = [];
    for (let i = 5; i < 9; i++) plain.push((await post(other, a.event(i))).status);
    assert.deepEqual(plain, [200, 200, 200, 429], 'the default tier enforces');

    // null: premium follows the global mode (enforce) again.
    await setMode({ tiers: { premium: { mode: null } } });
    assert.equal((await post(from, a.event(9), premium)).status, 429);
    await setMode({ tiers: { premium: { mode: 'shadow' } } });
    assert.equal((await post(from, a.event(10), premium)).status, 200);
  });
});
