/**
 * What clients are told of quotas, per draft-ietf-httpapi-ratelimit-headers-11: RateLimit-Policy
 * and RateLimit, Retry-After never earlier than t, problem bodies of the draft's types (429
 * quota-exceeded; 503 temporary-reduced-capacity when a node's multiplier is 0), and the
 * opt-in X-RateLimit-* fields. A gateway process in front of a reference relay, over sockets
 * (the header fields alone, in process: test/unit/quota/ratelimit-headers.test.ts).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Event } from 'nostr-tools/pure';
import { QUOTA_EXCEEDED, TEMPORARY_REDUCED_CAPACITY } from '../../src/quota/responses.js';
import { addressSource, freshAuthor, storedAt } from '../helpers/clients.js';
import { uniquePrefix } from '../helpers/env.js';
import { NostrClient, admin, request, suiteRelayAndGateway } from '../helpers/gateway.js';

const suite = suiteRelayAndGateway({
  quotas: {
    keyPrefix: uniquePrefix('headers'),
    tiers: { default: { write: { points: 2, windowSec: 30 } } },
    headers: { legacy: true },
  },
});
const freshClientAddress = addressSource(4);

function post(from: string, event: Event) {
  return request(`${suite.gw().url}/events`, {
    method: 'POST',
    body: JSON.stringify(event),
    from,
  });
}

/** The parameters of a one-item structured-field list: `"writes";r=0;t=30` -> {r: 0, t: 30}. */
function params(field: unknown): { name: string; values: Record<string, number> } {
  const [item, ...rest] = String(field).split(';');
  const values = Object.fromEntries(
    rest.map((p) => {
      const [k, v] = p.split('=');
      return [k!, Number(v)];
    }),
  );
  return { name: item!, values };
}

interface ProblemBody {
  type: string;
  status: number;
  title: string;
  detail: string;
  'violated-policies': string[];
}

async function setMultiplier(multiplier: number): Promise<void> {
  const body = { nodes: { 'relay-a': { multiplier } } };
  const res = await admin(suite.gw(), 'POST', '/admin/flow-control', body);
  assert.equal(res.status, 200, res.body);
}

describe('rate-limit headers and problems (draft 11)', { timeout: 120_000 }, () => {
  it('a write over the quota: 429, quota-exceeded naming the policy, Retry-After not earlier than t', async () => {
    const from = freshClientAddress();
    const a = freshAuthor();
    const admitted = await post(from, a.event(0));
    assert.equal(admitted.status, 200);
    assert.equal(admitted.headers['ratelimit-policy'], '"writes";q=2;w=30');
    assert.equal(params(admitted.headers.ratelimit).values.r, 1);
    assert.equal((await post(from, a.event(1))).status, 200);
    const refused = await post(from, a.event(2));
    assert.equal(refused.status, 429);
    assert.match(String(refused.headers['content-type']), /^application\/problem\+json/);
    const { name, values } = params(refused.headers.ratelimit);
    assert.equal(name, '"writes"');
    assert.equal(values.r, 0);
    assert.ok(values.t! >= 1 && values.t! <= 30, `t=${values.t}`);
    assert.ok(Number(refused.headers['retry-after']) >= values.t!, 'Retry-After >= t');
    const body = JSON.parse(refused.body) as ProblemBody;
    assert.equal(body.type, QUOTA_EXCEEDED);
    assert.equal(body.status, 429);
    assert.deepEqual(body['violated-policies'], ['writes']);
    assert.equal(await storedAt(suite.relay().url, a.pubkey), 2);
  });

  it('the compatibility option also sends X-RateLimit-Limit, -Remaining and -Reset', async () => {
    const from = freshClientAddress();
    const a = freshAuthor();
    const first = await post(from, a.event(0));
    assert.equal(first.headers['x-ratelimit-limit'], '2');
    assert.equal(first.headers['x-ratelimit-remaining'], '1');
    const t = params(first.headers.ratelimit).values.t;
    assert.equal(first.headers['x-ratelimit-reset'], String(t));
    await post(from, a.event(1));
    const refused = await post(from, a.event(2));
    assert.equal(refused.status, 429);
    assert.equal(refused.headers['x-ratelimit-remaining'], '0');
    assert.equal(refused.headers['x-ratelimit-limit'], '2');
  });

  it('a node at multiplier 0 refuses writes 503 temporary-reduced-capacity, never 429', async () => {
    await setMultiplier(0);
    try {
      const from = freshClientAddress();
      const a = freshAuthor();
      const res = await post(from, a.event(0));
      assert.equal(res.status, 503);
      const body = JSON.parse(res.body) as ProblemBody;
      assert.equal(body.type, TEMPORARY_REDUCED_CAPACITY);
      assert.deepEqual(body['violated-policies'], ['writes']);
      assert.equal(res.headers['ratelimit-policy'], '"writes";q=0;w=30');
      const { values } = params(res.headers.ratelimit);
      assert.ok(Number(res.headers['retry-after']) >= Math.max(1, values.t!));
      const nostr = await NostrClient.connect(suite.gw().url, from);
      try {
        nostr.send(['EVENT', a.event(1)]);
        await nostr.until((msgs) => msgs.some((m) => m[0] === 'OK'));
        const [ok] = nostr.oks();
        assert.equal(ok![2], false);
        assert.match(String(ok![3]), /^rate-limited: the relay is short of capacity/);
      } finally {
        nostr.close();
      }
      const read = await request(`${suite.gw().url}/events?authors=${a.pubkey}`, { from });
      assert.equal(read.status, 200, 'reads without a read limit stay free');
      assert.equal(await storedAt(suite.relay().url, a.pubkey), 0);
    } finally {
      await setMultiplier(1);
    }
  });
});
