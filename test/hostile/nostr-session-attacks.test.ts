/**
 * Attacks on the Nostr operator policy (issue 21), each over a raw socket against a real
 * gateway and relay: what must be refused, and who must (and must not) be charged.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { makeAuthEvent } from 'nostr-tools/nip42';
import { finalizeEvent, generateSecretKey, getPublicKey } from 'nostr-tools/pure';
import type { Event } from 'nostr-tools/pure';
import { WebSocketServer } from 'ws';
import { request, startGateway, writesConsumed } from '../helpers/gateway.js';
import type { GatewayUnderTest } from '../helpers/gateway.js';
import { relayHas, signedEvent } from '../helpers/nostr-events.js';
import { nostrSuite } from '../helpers/nostr-suite.js';
import { stopAll } from '../helpers/processes.js';
import { RawNostr } from '../helpers/raw-nostr.js';
import { waitFor } from '../helpers/raw-socket.js';

const PUBLIC_URL = 'wss://relay.example.test';
const LIMIT = 4;

function authEvent(challenge: string, sk: Uint8Array): Event {
  return finalizeEvent(makeAuthEvent(PUBLIC_URL, challenge), sk);
}

async function challengeOf(client: RawNostr): Promise<string> {
  await client.until('an AUTH challenge', (m) => m.some((x) => x[0] === 'AUTH'));
  return String(client.received.find((x) => x[0] === 'AUTH')![1]);
}

/** Open `from`, AUTH as a fresh key (answered), and write `count` events: how many were accepted. */
async function authAndWrite(url: string, from: string, count: number, clients: RawNostr[]) {
  const client = await RawNostr.open(url, from);
  clients.push(client);
  const auth = authEvent(await challengeOf(client), generateSecretKey());
  client.send(['AUTH', auth]);
  await client.okFor(auth.id);
  let accepted = 0;
  for (let i = 0; i < count; i++) {
    const e = signedEvent(1, `${from} ${i}`);
    client.send(['EVENT', e]);
    if ((await client.okFor(e.id))[2] === true) accepted++;
  }
  return { client, accepted };
}

describe('attack 1: fresh keypairs do not mint quota', { timeout: 90_000 }, () => {
  const suite = nostrSuite({
    client: 'iovalkey',
    mode: 'standalone',
    limit: LIMIT,
    relayArgs: ['--public-url', `${PUBLIC_URL}/`],
    settings: { identity: { order: ['auth', 'ip'] }, nostr: { publicUrl: PUBLIC_URL } },
  });
  const clients: RawNostr[] = [];
  after(() => clients.forEach((c) => c.close()));

  it('refuses a second key on one connection; the address pays beside each key', async () => {
    const url = suite.gw().url;
    const first = await authAndWrite(url, '127.0.21.2', LIMIT, clients);
    assert.equal(first.accepted, LIMIT);
    // Out of quota: AUTH again as a fresh key.
    const again = authEvent(await challengeOf(first.client), generateSecretKey());
    first.client.send(['AUTH', again]);
    const ok = await first.client.okFor(again.id);
    assert.equal(ok[2], false, 'a second pubkey on one connection is refused');
    assert.match(String(ok[3]), /^restricted:/);
    const more = signedEvent(1, 'one more');
    first.client.send(['EVENT', more]);
    const answer = await first.client.okFor(more.id);
    assert.equal(answer[2], false, `no fresh quota from a fresh key: ${JSON.stringify(answer)}`);
    assert.match(String(answer[3]), /^rate-limited:/);
    assert.equal(await writesConsumed(suite.gw(), 'ip:127.0.21.2'), LIMIT);
  });

  it('one fresh key per connection: the address still runs out', async () => {
    const url = suite.gw().url;
    let accepted = 0;
    for (let i = 0; i < 3; i++)
      accepted += (await authAndWrite(url, '127.0.21.3', 3, clients)).accepted;
    assert.equal(accepted, LIMIT, 'three keys, one address: one quota');
  });
});

describe('attacks 2 and 3: nostr.verify relay', { timeout: 90_000 }, () => {
  const suite = nostrSuite({
    client: 'iovalkey',
    mode: 'standalone',
    limit: LIMIT,
    settings: { identity: { order: ['pubkey', 'ip'] }, nostr: { verify: 'relay' } },
  });
  const clients: RawNostr[] = [];
  after(() => clients.forEach((c) => c.close()));

  it('2: a twin of an awaited event never charges the victim, nor spares the author', async () => {
    const attackerSk = generateSecretKey();
    const victimSk = generateSecretKey();
    const victimPk = getPublicKey(victimSk);
    const real = signedEvent(1, 'the attacker writes', attackerSk);
    const victimSig = signedEvent(1, 'anything', victimSk).sig;
    const twin = { ...real, pubkey: victimPk, sig: victimSig };
    const client = await RawNostr.open(suite.gw().url, '127.0.21.4');
    clients.push(client);
    client.send(['EVENT', real]);
    client.send(['EVENT', twin]);
    await client.until('two OKs', (m) => m.filter((x) => x[0] === 'OK').length === 2);
    assert.ok(await relayHas(suite.relay().url, real.id));
    await waitFor('the author charged', async () => {
      return (await writesConsumed(suite.gw(), `pk:${getPublicKey(attackerSk)}`)) === 1;
    });
    assert.equal(await writesConsumed(suite.gw(), `pk:${victimPk}`), 0, 'the victim paid nothing');
  });

  it('3: an EVENT followed by a FIN still charges its author', async () => {
    const sk = generateSecretKey();
    const event = signedEvent(1, 'write and run', sk);
    const client = await RawNostr.open(suite.gw().url, '127.0.21.5');
    clients.push(client);
    client.send(['EVENT', event]);
    client.fin();
    await waitFor('the relay stored it', () => relayHas(suite.relay().url, event.id));
    await waitFor(
      'the author charged after the client left',
      async () => (await writesConsumed(suite.gw(), `pk:${getPublicKey(sk)}`)) === 1,
      5000,
    );
  });
});

describe('attack 4: first-sight claims do not censor', { timeout: 90_000 }, () => {
  const suite = nostrSuite({
    client: 'iovalkey',
    mode: 'standalone',
    limit: LIMIT,
    settings: { identity: { order: ['pubkey', 'ip'] } },
  });
  const clients: RawNostr[] = [];
  after(() => clients.forEach((c) => c.close()));

  it('a copy the relay refuses neither claims the id nor charges the author', async () => {
    const sk = generateSecretKey();
    const genuine = signedEvent(1, 'to be censored', sk);
    const attacker = await RawNostr.open(suite.gw().url, '127.0.21.6');
    clients.push(attacker);
    // The same event, its signature in upper case: it verifies, and the relay refuses it.
    attacker.send(['EVENT', { ...genuine, sig: genuine.sig.toUpperCase() }]);
    const refused = await attacker.okFor(genuine.id);
    assert.equal(refused[2], false);
    assert.equal(await writesConsumed(suite.gw(), `pk:${getPublicKey(sk)}`), 0);

    const author = await RawNostr.open(suite.gw().url, '127.0.21.7');
    clients.push(author);
    author.send(['EVENT', genuine]);
    const ok = await author.okFor(genuine.id);
    assert.deepEqual(ok.slice(2), [true, ''], `the genuine event is stored: ${JSON.stringify(ok)}`);
    assert.ok(await relayHas(suite.relay().url, genuine.id));
  });
});

/**
 * A relay that answers a REQ of an open id CLOSED and keeps the old subscription (NIP-01
 * says replace; relays differ), counting what it holds.
 */
class KeepingRelay {
  maxHeld = 0;
  private constructor(readonly server: http.Server) {
    const wss = new WebSocketServer({ noServer: true });
    server.on('request', (_req, res) => res.end('ok'));
    server.on('upgrade', (req, socket, head) =>
      wss.handleUpgrade(req, socket, head, (ws) => {
        const held = new Set<string>();
        ws.on('message', (data: Buffer) => {
          const [verb, subId] = JSON.parse(data.toString()) as [string, string];
          if (verb === 'REQ' && held.has(subId)) {
            ws.send(JSON.stringify(['CLOSED', subId, 'duplicate: subscription already open']));
          } else if (verb === 'REQ') {
            held.add(subId);
            ws.send(JSON.stringify(['EOSE', subId]));
          } else if (verb === 'CLOSE') held.delete(subId);
          this.maxHeld = Math.max(this.maxHeld, held.size);
        });
      }),
    );
  }

  static async start(): Promise<KeepingRelay> {
    const server = http.createServer();
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    return new KeepingRelay(server);
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((r) => this.server.close(() => r()));
  }
}

describe('attack 5: subscription caps count what the relay holds', { timeout: 90_000 }, () => {
  let relay: KeepingRelay;
  let gw: GatewayUnderTest;
  const clients: RawNostr[] = [];
  before(async () => {
    relay = await KeepingRelay.start();
    gw = await startGateway('iovalkey', 'standalone', [{ id: 'relay-a', url: relay.url }], {
      nostr: { maxSubscriptions: 2 },
    });
  });
  after(async () => {
    clients.forEach((c) => c.close());
    await stopAll(gw?.proc);
    await relay?.close();
  });

  it('a re-REQ the relay answers CLOSED frees no slot the relay still holds', async () => {
    const client = await RawNostr.open(gw.url, '127.0.21.8');
    clients.push(client);
    const answered = (id: string) => (m: unknown[][]) =>
      m.some((x) => (x[0] === 'EOSE' || x[0] === 'CLOSED') && x[1] === id);
    for (const id of ['a', 'b']) {
      client.send(['REQ', id, { kinds: [1] }]);
      await client.until(`REQ ${id}`, answered(id));
    }
    client.send(['REQ', 'a', { kinds: [1] }]);
    await client.until('CLOSED a', (m) => m.some((x) => x[0] === 'CLOSED' && x[1] === 'a'));
    for (const id of ['c', 'd', 'e']) {
      client.send(['REQ', id, { kinds: [1] }]);
      await client.until(`REQ ${id}`, answered(id));
    }
    assert.ok(relay.maxHeld <= 2, `the relay held ${relay.maxHeld} subscriptions, cap 2`);
  });
});

describe('attack 6: one event policy over HTTP and WebSocket', { timeout: 90_000 }, () => {
  const suite = nostrSuite({
    client: 'iovalkey',
    mode: 'standalone',
    limit: LIMIT,
    settings: { identity: { order: ['pubkey', 'ip'] }, nostr: { blockedKinds: [4] } },
  });
  const post = (event: Event, from: string) =>
    request(`${suite.gw().url}/events`, {
      method: 'POST',
      body: JSON.stringify(event),
      from,
    });

  it('refuses over POST /events what it refuses over WebSocket', async () => {
    const blocked = signedEvent(4, 'a DM the operator does not take');
    const res = await post(blocked, '127.0.21.9');
    assert.equal(res.status, 403, res.body);
    assert.match(res.body, /blocked: events of kind 4/);
    assert.equal(await relayHas(suite.relay().url, blocked.id), false);
  });

  it('charges the author of an HTTP event once; a replay over HTTP is free for it', async () => {
    const sk = generateSecretKey();
    const event = signedEvent(1, 'over HTTP', sk);
    assert.equal((await post(event, '127.0.21.10')).status, 200);
    // The replay goes to Valkey after the claim (one client, in order): it is found seen.
    assert.equal((await post(event, '127.0.21.11')).status, 200);
    assert.equal(await writesConsumed(suite.gw(), `pk:${getPublicKey(sk)}`), 1);
    const forged = { ...event, content: 'changed' };
    assert.equal((await post(forged, '127.0.21.10')).status, 400);
  });
});
