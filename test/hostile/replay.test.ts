/**
 * Attack: drain a victim's pubkey quota by replaying one of the victim's signed events from
 * another connection (and through another gateway sharing the Valkey). A signature proves
 * who wrote an event, not who sends it: replays are answered `duplicate:` and cost the
 * author nothing; the sender pays for them from its own address.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { finalizeEvent, generateSecretKey } from 'nostr-tools/pure';
import type { Event } from 'nostr-tools/pure';
import { NostrClient, admin, request, startGateway } from '../helpers/gateway.js';
import type { GatewayUnderTest } from '../helpers/gateway.js';
import { startRelay } from '../helpers/processes.js';
import type { RelayProcess } from '../helpers/processes.js';
import { waitFor } from '../helpers/raw-socket.js';

const LIMIT = 10;

function signer() {
  const sk = generateSecretKey();
  let n = 0;
  return (): Event =>
    finalizeEvent(
      { kind: 1, created_at: Math.floor(Date.now() / 1000), tags: [], content: `note ${n++}` },
      sk,
    );
}

/** A client's writes as a gateway shows them: Valkey's count, and the points it holds leased. */
async function clientWrites(
  gw: GatewayUnderTest,
  client: string,
): Promise<{ counted: number; held: number }> {
  const res = await admin(gw, 'GET', `/admin/clients/${client}`);
  assert.equal(res.status, 200, res.body);
  const { write } = JSON.parse(res.body) as {
    write: { consumed: number; lease?: { held: number } | null };
  };
  return { counted: write.consumed, held: write.lease?.held ?? 0 };
}

/** The OK answer for one event id, waited for with a deadline. */
async function okFor(client: NostrClient, id: string): Promise<unknown[]> {
  await client.until((msgs) => msgs.some((m) => m[0] === 'OK' && m[1] === id));
  return client.received.find((m) => m[0] === 'OK' && m[1] === id)!;
}

describe('replayed events cost their author nothing', { timeout: 90_000 }, () => {
  let relay: RelayProcess;
  let gateways: GatewayUnderTest[] = [];
  const clients: NostrClient[] = [];

  before(async () => {
    relay = await startRelay({ nodeId: 'relay-a' });
    const settings = {
      identity: { order: ['pubkey', 'ip'] },
      quotas: {
        keyPrefix: `replay${Date.now().toString(36)}`,
        tiers: { default: { write: { points: LIMIT, windowSec: 60 } } },
      },
    };
    // Two gateways sharing one Valkey: a replay through either is known to both.
    gateways = await Promise.all([
      startGateway('iovalkey', 'standalone', [{ id: 'relay-a', url: relay.url }], settings),
      startGateway('valkey-glide', 'standalone', [{ id: 'relay-a', url: relay.url }], settings),
    ]);
  });

  after(async () => {
    for (const c of clients) c.close();
    await Promise.allSettled(gateways.map((g) => g.proc.stop()));
    await relay?.stop();
  });

  it('answers replays duplicate:, keeps the victim whole and stores each event once', async () => {
    const victimSigns = signer();
    const victim = await NostrClient.connect(gateways[0]!.url, '127.0.10.2');
    const attackerA = await NostrClient.connect(gateways[0]!.url, '127.0.10.3');
    const attackerB = await NostrClient.connect(gateways[1]!.url, '127.0.10.4');
    clients.push(victim, attackerA, attackerB);

    const stolen = victimSigns();
    victim.send(['EVENT', stolen]);
    assert.deepEqual((await okFor(victim, stolen.id)).slice(0, 3), ['OK', stolen.id, true]);

    // 15 replays over two gateways: more than the victim's whole quota. The gateway that
    // accepted it answers from memory; the other (the author unknown there) forwards each on
    // its hash, the author charged until the relay's `duplicate:` gives it back. B waits for
    // each answer, as a client does before it sends an id again (one it resends while the
    // first is awaited is refused on its connection: see the session's bounds).
    for (let i = 0; i < 8; i++) attackerA.send(['EVENT', stolen]);
    for (let i = 0; i < 7; i++) {
      attackerB.send(['EVENT', stolen]);
      await attackerB.until((m) => m.filter((x) => x[0] === 'OK').length === i + 1);
    }
    await attackerA.until((m) => m.filter((x) => x[0] === 'OK').length === 8);
    const replayAnswers = [...attackerA.oks(), ...attackerB.oks()];
    for (const ok of replayAnswers) {
      assert.equal(ok[2], true, `a replay is accepted as already held: ${JSON.stringify(ok)}`);
      assert.match(String(ok[3]), /^duplicate:/);
    }

    // The victim paid for its one event: Valkey's count less what each gateway holds leased
    // and unspent, once the relay's last answer has given its replay's charge back.
    const client = `pk:${stolen.pubkey}`;
    let heldThere = 0;
    await waitFor('the replays given back', async () => {
      const [here, there] = await Promise.all(gateways.map((gw) => clientWrites(gw, client)));
      heldThere = there!.held;
      return here!.counted - here!.held - there!.held === 1;
    });
    // It can still spend the rest of its quota on new events (less what the other gateway
    // holds leased for now), and no more.
    const fresh = Array.from({ length: LIMIT }, victimSigns);
    for (const e of fresh) victim.send(['EVENT', e]);
    const answers = await Promise.all(fresh.map((e) => okFor(victim, e.id)));
    const accepted = answers.filter((a) => a[2] === true).length;
    assert.equal(accepted, LIMIT - 1 - heldThere, 'the victim kept every point');
    assert.match(String(answers.find((a) => a[2] === false)?.[3]), /^rate-limited:/);

    const stored = await request(`${relay.url}/events?ids=${stolen.id}`);
    assert.equal((JSON.parse(stored.body) as unknown[]).length, 1, 'the relay holds it once');
  });

  it('a replay of an event charged on its hash (claimed nowhere) costs its author nothing either, over WebSocket or HTTP', async () => {
    const victimSigns = signer();
    const victim = await NostrClient.connect(gateways[0]!.url, '127.0.10.7');
    const attacker = await NostrClient.connect(gateways[1]!.url, '127.0.10.8');
    clients.push(victim, attacker);
    // With room left (or unknown), its events go on their hash: the third is accepted
    // without a claim in Valkey.
    const own = [victimSigns(), victimSigns(), victimSigns()];
    for (const e of own) {
      victim.send(['EVENT', e]);
      assert.equal((await okFor(victim, e.id))[2], true);
    }
    const stolen = own[2]!;
    // Over POST /events first, through the gateway that never saw it (the relay's
    // `duplicate:` gives the author its charge back, then the id is claimed) and the one that
    // did; then over WebSocket.
    for (const gw of [gateways[1]!, gateways[1]!, gateways[0]!]) {
      const res = await request(`${gw.url}/events`, {
        method: 'POST',
        body: JSON.stringify(stolen),
        from: '127.0.10.9',
      });
      assert.equal(res.status, 200, res.body);
      assert.match(res.body, /duplicate:/);
    }
    for (let i = 0; i < 3; i++) attacker.send(['EVENT', stolen]);
    await attacker.until((m) => m.filter((x) => x[0] === 'OK').length === 3);
    for (const ok of attacker.oks()) assert.match(String(ok[3]), /^duplicate:/);
    // Six replays, and the victim paid for its own three events only: Valkey's count less
    // what each gateway holds leased and unspent (a refund on the attacker's gateway went
    // into its lease there, handed back when idle).
    const client = `pk:${stolen.pubkey}`;
    const [here, there] = await Promise.all(gateways.map((gw) => clientWrites(gw, client)));
    assert.equal(here!.counted - here!.held - there!.held, own.length);
    const heldThere = there!.held;
    // It can spend the rest of its quota, less what the other gateway holds for now.
    const fresh = Array.from({ length: LIMIT }, victimSigns);
    for (const e of fresh) victim.send(['EVENT', e]);
    const answers = await Promise.all(fresh.map((e) => okFor(victim, e.id)));
    assert.equal(answers.filter((a) => a[2] === true).length, LIMIT - own.length - heldThere);
  });

  it('charges the replaying address: its own quota runs out, not the author', async () => {
    const victimSigns = signer();
    const victim = await NostrClient.connect(gateways[0]!.url, '127.0.10.5');
    const attacker = await NostrClient.connect(gateways[0]!.url, '127.0.10.6');
    clients.push(victim, attacker);
    const stolen = victimSigns();
    victim.send(['EVENT', stolen]);
    await okFor(victim, stolen.id);

    for (let i = 0; i < LIMIT + 5; i++) attacker.send(['EVENT', stolen]);
    await attacker.until((m) => m.filter((x) => x[0] === 'OK').length === LIMIT + 5);
    const prefixes = attacker.oks().map((ok) => String(ok[3]).split(':')[0]);
    assert.equal(prefixes.filter((p) => p === 'duplicate').length, LIMIT);
    assert.equal(prefixes.filter((p) => p === 'rate-limited').length, 5);
  });
});
