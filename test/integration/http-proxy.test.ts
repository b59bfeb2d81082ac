/**
 * The HTTP proxy's behaviour that does not depend on the Valkey client or topology, through
 * Fastify's inject(): the gateway built in this process on a real Valkey (iovalkey,
 * standalone) in front of real relay processes, with no client socket needed. What depends on
 * the client and topology runs against gateway processes in gateway.test.ts.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { finalizeEvent, generateSecretKey, getPublicKey } from 'nostr-tools/pure';
import { pino } from 'pino';
import { validateGatewayConfig } from '../../src/config/load.js';
import { buildGateway } from '../../src/gateway/server.js';
import type { BuiltGateway } from '../../src/gateway/server.js';
import { standaloneNodes, uniquePrefix } from '../helpers/env.js';
import { startRelay } from '../helpers/processes.js';
import type { SluiceProcess } from '../helpers/processes.js';

const TOKEN = 'test-admin-token-0123456789';
let relays: SluiceProcess[] = [];
let gw: BuiltGateway;

before(async () => {
  relays = await Promise.all([
    startRelay({ nodeId: 'relay-a' }),
    startRelay({ nodeId: 'relay-b' }),
  ]);
  const config = validateGatewayConfig({
    admin: { token: TOKEN },
    valkey: {
      client: 'iovalkey',
      mode: 'standalone',
      nodes: standaloneNodes().map((n) => `${n.host}:${n.port}`),
    },
    upstreams: relays.map((r, i) => ({ id: i === 0 ? 'relay-a' : 'relay-b', url: r.url })),
    // The senders' quotas are this suite's subject: an event's author (charged over HTTP as
    // over WebSocket) is left out. See test/hostile/nostr-session-attacks.test.ts.
    identity: { order: ['apiKey', 'ip'] },
    quotas: {
      keyPrefix: uniquePrefix('http-proxy'),
      tiers: {
        default: { write: { points: 10, windowSec: 10 } },
        premium: { write: { points: 20, windowSec: 10 } },
      },
      apiKeys: { 'premium-key-1': 'premium' },
    },
    workers: 1,
  });
  gw = await buildGateway(config, pino({ level: 'warn' }));
});

after(async () => {
  await gw?.close();
  await Promise.all(relays.map((r) => r.stop()));
});

let source = 1;
/** A loopback address no other test has used: a client of its own. */
function freshClientAddress(): string {
  source++;
  return `127.1.${Math.floor(source / 250)}.${(source % 250) + 2}`;
}

const now = () => Math.floor(Date.now() / 1000);

/** A fresh author, so what the relays hold of it belongs to one test. */
function author() {
  const sk = generateSecretKey();
  return {
    pubkey: getPublicKey(sk),
    body: (i: number) =>
      JSON.stringify(
        finalizeEvent({ kind: 1, created_at: now() - i, tags: [], content: `n${i}` }, sk),
      ),
  };
}

function post(from: string, body: string, headers: Record<string, string> = {}) {
  return gw.app.inject({
    method: 'POST',
    url: '/events',
    payload: body,
    remoteAddress: from,
    headers: { 'content-type': 'application/json', ...headers },
  });
}

/** Write `n` events of one author from one address; the statuses in order. */
async function writes(from: string, n: number, headers: Record<string, string> = {}) {
  const a = author();
  const statuses: number[] = [];
  for (let i = 0; i < n; i++) statuses.push((await post(from, a.body(i), headers)).statusCode);
  return { a, statuses };
}

function adminCall(method: 'GET' | 'POST', url: string, payload?: unknown, token = TOKEN) {
  return gw.admin.inject({
    method,
    url,
    headers: token ? { authorization: `Bearer ${token}` } : {},
    ...(payload === undefined ? {} : { payload: payload as object }),
  });
}

async function valkeyCalls(): Promise<number> {
  const metric = await gw.ctx.metrics.valkeyCall.get();
  return metric.values
    .filter((v) => v.metricName === 'sluice_valkey_call_seconds_count')
    .reduce((sum, v) => sum + v.value, 0);
}

describe('HTTP proxy in process (inject), iovalkey on standalone', { timeout: 60_000 }, () => {
  it('a client over its limit is turned away from memory, with no Valkey call', async () => {
    const from = freshClientAddress();
    const { a } = await writes(from, 11);
    const before = await valkeyCalls();
    for (let i = 11; i < 16; i++) {
      const res = await post(from, a.body(i));
      assert.equal(res.statusCode, 429);
      assert.ok(Number(res.headers['retry-after']) >= 1);
    }
    assert.equal(await valkeyCalls(), before, 'rejections of a blocked client cost no round trip');
  });

  it('reads are not charged, and two clients are independent', async () => {
    const first = freshClientAddress();
    const { a } = await writes(first, 10);
    for (let i = 0; i < 5; i++) {
      const read = await gw.app.inject({
        url: `/events?authors=${a.pubkey}`,
        remoteAddress: first,
      });
      assert.equal(read.statusCode, 200);
      assert.equal((JSON.parse(read.body) as unknown[]).length, 10, 'the relay answered');
    }
    assert.equal((await post(first, a.body(10))).statusCode, 429);
    const other = await post(freshClientAddress(), a.body(11));
    assert.equal(other.statusCode, 200);
    assert.match(String(other.headers.ratelimit), /r=9;/);
  });

  it('an API key maps to its tier and its own limit', async () => {
    const { statuses } = await writes(freshClientAddress(), 22, { 'x-api-key': 'premium-key-1' });
    assert.equal(statuses.filter((s) => s === 200).length, 20);
    assert.equal(statuses.filter((s) => s === 429).length, 2);
  });

  it('a spoofed X-Forwarded-For from an untrusted peer does not change the identity', async () => {
    const from = freshClientAddress();
    const a = author();
    const statuses = [];
    for (let i = 0; i < 12; i++) {
      const res = await post(from, a.body(i), { 'x-forwarded-for': `198.51.100.${i}` });
      statuses.push(res.statusCode);
    }
    assert.deepEqual(statuses.slice(10), [429, 429]);
  });

  it('a multiplier of 0.5 from the admin endpoint halves the limit at once, and shows in headers', async () => {
    const halve = { nodes: { 'relay-a': { multiplier: 0.5 }, 'relay-b': { multiplier: 0.5 } } };
    assert.equal((await adminCall('POST', '/admin/flow-control', halve, '')).statusCode, 401);
    const set = await adminCall('POST', '/admin/flow-control', halve);
    assert.equal(set.statusCode, 200, set.body);
    try {
      const from = freshClientAddress();
      const a = author();
      const first = await post(from, a.body(0));
      assert.equal(first.headers['ratelimit-policy'], '"writes";q=5;w=10');
      const { statuses } = await writes(from, 7);
      assert.equal([first.statusCode, ...statuses].filter((s) => s === 200).length, 5);
      const state = JSON.parse((await adminCall('GET', '/admin/flow-control')).body) as {
        nodes: Record<string, { multiplier: number; source: string }>;
      };
      assert.equal(state.nodes['relay-a']?.multiplier, 0.5);
      assert.equal(state.nodes['relay-a']?.source, 'admin');
    } finally {
      const reset = { nodes: { 'relay-a': { multiplier: 1 }, 'relay-b': { multiplier: 1 } } };
      await adminCall('POST', '/admin/flow-control', reset);
    }
  });
});
