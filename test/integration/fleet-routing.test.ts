/**
 * A fleet that routes around a sick node: three reference relays behind one gateway with
 * `routing: headroom` and `pressure.drain`. Once one node's multiplier is pinned low (the
 * admin endpoint), new HTTP writes and new WebSockets go to the other two, and the
 * WebSockets pinned to the sick node get a NOTICE and a close 1013 a few at a time, each
 * after the OKs of what it had sent, and reconnect onto a node with headroom.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { finalizeEvent, generateSecretKey } from 'nostr-tools/pure';
import type { Event } from 'nostr-tools/pure';
import { NostrClient, admin, metricValue, request, startGateway } from '../helpers/gateway.js';
import type { GatewayUnderTest } from '../helpers/gateway.js';
import { startRelay, stopAll } from '../helpers/processes.js';
import type { RelayProcess } from '../helpers/processes.js';
import { maxInAnySecond } from '../helpers/rates.js';

const NODES = ['relay-a', 'relay-b', 'relay-c'];
const SICK = 2;
/** pressure.drain of the gateway under test: 20% of the sick node's connections a second. */
const DRAIN = { enabled: true, sharePerSec: 0.2, minPerSec: 1, settleMs: 5000 };

const key = generateSecretKey();
let serial = 0;
function event(): Event {
  return finalizeEvent(
    {
      kind: 1,
      created_at: Math.floor(Date.now() / 1000),
      tags: [],
      content: `fleet ${serial++} ${Math.random()}`,
    },
    key,
  );
}

/** Which relay (index) stores each id; an id stored nowhere is absent. */
async function whereStored(relays: RelayProcess[], ids: string[]): Promise<Map<string, number>> {
  const at = new Map<string, number>();
  for (let from = 0; from < ids.length; from += 100) {
    const batch = ids.slice(from, from + 100).join(',');
    for (const [i, relay] of relays.entries()) {
      const res = await request(`${relay.url}/events?ids=${batch}`);
      assert.equal(res.status, 200, res.body);
      for (const e of JSON.parse(res.body) as Event[]) at.set(e.id, i);
    }
  }
  return at;
}

/** A client connection and what happened to it. */
interface Tracked {
  nostr: NostrClient;
  node: number;
  closed?: { code: number; reason: string; at: number };
  errors: Error[];
}

async function connect(gw: GatewayUnderTest, relays: RelayProcess[]): Promise<Tracked> {
  const nostr = await NostrClient.connect(gw.url, '127.0.8.2');
  const ev = event();
  const ok = await nostr.okFor(ev.id, ['EVENT', ev]);
  assert.equal(ok[2], true, JSON.stringify(ok));
  const node = (await whereStored(relays, [ev.id])).get(ev.id);
  assert.ok(node !== undefined, 'its event is stored');
  const tracked: Tracked = { nostr, node, errors: [] };
  nostr.ws.on('error', (err) => tracked.errors.push(err));
  nostr.ws.once('close', (code, reason) => {
    tracked.closed = { code, reason: reason.toString(), at: Date.now() };
  });
  return tracked;
}

describe('headroom routing and the drain of a sick node', { timeout: 180_000 }, () => {
  let relays: RelayProcess[];
  let gw: GatewayUnderTest;
  const conns: Tracked[] = [];

  before(async () => {
    relays = await Promise.all(NODES.map((nodeId) => startRelay({ nodeId })));
    gw = await startGateway(
      'iovalkey',
      'standalone',
      NODES.map((id, i) => ({ id, url: relays[i]!.url })),
      {
        routing: 'headroom',
        // Quotas far above what the test writes: only routing and the drain are under test.
        quotas: {
          keyPrefix: `fleet${Date.now()}`,
          tiers: { default: { write: { points: 1_000_000, windowSec: 60 } } },
        },
        pressure: { drain: DRAIN },
      },
    );
  });

  after(async () => {
    for (const c of conns) c.nostr.ws.terminate();
    await stopAll(gw?.proc, ...(relays ?? []));
  });

  it('spreads new connections over every node while all have headroom', async () => {
    // Until the node that will fall sick holds enough connections to drain (bounded).
    while (conns.filter((c) => c.node === SICK).length < 10) {
      assert.ok(conns.length < 80, 'connections reach every node');
      conns.push(await connect(gw, relays));
    }
    for (let i = 0; i < NODES.length; i++) {
      assert.ok(
        conns.some((c) => c.node === i),
        `${NODES[i]} takes connections`,
      );
    }
  });

  it('sends new writes and connections elsewhere, and drains the sick node a few a second', async () => {
    const pinned = conns.filter((c) => c.node === SICK);
    const others = conns.filter((c) => c.node !== SICK);
    // The pinned clients keep writing (one EVENT at a time, the next after its OK) until closed.
    const sent = new Map<Tracked, string[]>();
    const writing = pinned.map(async (c) => {
      const ids: string[] = [];
      sent.set(c, ids);
      while (!c.closed) {
        const ev = event();
        ids.push(ev.id);
        c.nostr.send(['EVENT', ev]);
        await c.nostr
          .until((m) => m.some((x) => x[0] === 'OK' && x[1] === ev.id) || !!c.closed, 10_000)
          .catch(() => undefined);
        await sleep(50);
      }
    });

    const set = await admin(gw, 'POST', '/admin/flow-control', {
      nodes: { [NODES[SICK]!]: { multiplier: 0.2 } },
    });
    assert.equal(set.status, 200, set.body);

    // New HTTP writes: each chooses by headroom, and relay-c has far less.
    const httpIds: string[] = [];
    for (let i = 0; i < 30; i++) {
      const ev = event();
      const res = await request(`${gw.url}/events`, {
        method: 'POST',
        body: JSON.stringify(ev),
        from: '127.0.8.3',
      });
      assert.equal(res.status, 200, res.body);
      httpIds.push(ev.id);
    }
    const stored = await whereStored(relays, httpIds);
    const httpNodes = httpIds.map((id) => stored.get(id));
    assert.ok(!httpNodes.includes(SICK), `HTTP writes avoid the sick node: ${httpNodes.join()}`);
    assert.ok(httpNodes.includes(0) && httpNodes.includes(1), 'and spread over the other two');

    // New WebSockets too.
    const fresh: Tracked[] = [];
    for (let i = 0; i < 8; i++) fresh.push(await connect(gw, relays));
    conns.push(...fresh);
    assert.ok(
      fresh.every((c) => c.node !== SICK),
      `new connections avoid it: ${fresh.map((c) => c.node).join()}`,
    );

    // Every connection pinned to the sick node is moved, a few a second.
    const deadline = Date.now() + 60_000;
    while (pinned.some((c) => !c.closed)) {
      assert.ok(Date.now() < deadline, 'every pinned connection is moved within a minute');
      await sleep(100);
    }
    await Promise.all(writing);
    const times = pinned.map((c) => c.closed!.at);
    // 20% of 10 is 2 a second; one more for a second's edge seen across the network.
    const most = maxInAnySecond(times);
    assert.ok(most <= 3, `at most 3 closes within any second, saw ${most}`);
    assert.ok(
      Math.max(...times) - Math.min(...times) >= 2000,
      'spread over seconds, never all at once',
    );

    const ackedIds: string[] = [];
    for (const c of pinned) {
      assert.equal(c.closed!.code, 1013, 'try again later');
      assert.match(c.closed!.reason, /reconnect/);
      assert.deepEqual(c.errors, [], 'no error besides the orderly close');
      const msgs = c.nostr.received;
      const notice = msgs.findIndex((m) => m[0] === 'NOTICE');
      assert.equal(notice, msgs.length - 1, 'the NOTICE is the last message before the close');
      assert.match(String(msgs[notice]![1]), /relay-c .*reconnect/);
      // Every EVENT answered was answered before the NOTICE, and OK true means stored.
      const okd = new Set(
        msgs.filter((m) => m[0] === 'OK' && m[2] === true).map((m) => m[1] as string),
      );
      assert.ok(
        msgs.every((m) => m[0] !== 'OK' || (m[1] !== undefined && m[2] === true)),
        'every answer an OK true',
      );
      ackedIds.push(...[...okd]);
      // At most the last EVENT, sent after the gateway stopped reading, is without an OK.
      const unanswered = sent.get(c)!.filter((id) => !okd.has(id));
      assert.ok(unanswered.length <= 1, `${unanswered.length} EVENTs without an OK`);
    }
    const where = await whereStored(relays, ackedIds);
    assert.ok(
      ackedIds.every((id) => where.get(id) === SICK),
      'every event acknowledged before the move is stored on the node that acknowledged it',
    );
    for (const c of others) assert.equal(c.closed, undefined, 'connections elsewhere stay');
    const counted = await metricValue(gw, 'sluice_websockets_drained_total', 'node="relay-c"');
    assert.equal(counted, pinned.length, 'each move counted');

    // The moved clients reconnect and land on a node with headroom.
    for (let i = 0; i < pinned.length; i++) {
      const back = await connect(gw, relays);
      conns.push(back);
      assert.notEqual(back.node, SICK, 'a reconnected client lands elsewhere');
    }
  });
});
