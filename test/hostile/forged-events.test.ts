/**
 * Attack: keep the gateway's core busy with well-formed events whose signatures do not
 * verify (each costs about a millisecond of CPU to check). The sender is charged before
 * verification, so its quota runs out and later forgeries cost no verification at all; a
 * connection that keeps sending events it could not have signed is closed (1008).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { finalizeEvent, generateSecretKey, getPublicKey } from 'nostr-tools/pure';
import type { Event } from 'nostr-tools/pure';
import { NostrClient, admin, metricValue, startGateway } from '../helpers/gateway.js';
import type { GatewayUnderTest } from '../helpers/gateway.js';
import { inNameOf } from '../helpers/nostr-events.js';
import { startRelay } from '../helpers/processes.js';
import type { RelayProcess } from '../helpers/processes.js';
import { RawNostr } from '../helpers/raw-nostr.js';

const LIMIT = 10;

/** A well-formed event (its id matches its content) with a signature of another key. */
function forged(n: number): Event {
  const real = finalizeEvent(
    { kind: 1, created_at: Math.floor(Date.now() / 1000), tags: [], content: `forged ${n}` },
    generateSecretKey(),
  );
  const other = finalizeEvent(
    { kind: 1, created_at: 1, tags: [], content: 'x' },
    generateSecretKey(),
  );
  return { ...real, sig: other.sig };
}

function closed(client: NostrClient, timeoutMs = 10_000): Promise<number> {
  return new Promise((resolve, reject) => {
    if (client.ws.readyState === client.ws.CLOSED) return reject(new Error('already closed'));
    const timer = setTimeout(() => reject(new Error('the gateway did not close')), timeoutMs);
    client.ws.once('close', (code) => {
      clearTimeout(timer);
      resolve(code);
    });
  });
}

describe('events that do not verify', { timeout: 90_000 }, () => {
  let relay: RelayProcess;
  let gw: GatewayUnderTest;
  let cutOff: GatewayUnderTest;
  const clients: NostrClient[] = [];

  before(async () => {
    relay = await startRelay({ nodeId: 'relay-a' });
    const upstreams = [{ id: 'relay-a', url: relay.url }];
    const quotas = (tag: string) => ({
      keyPrefix: `forged${tag}${Date.now().toString(36)}`,
      tiers: { default: { write: { points: LIMIT, windowSec: 60 } } },
    });
    [gw, cutOff] = await Promise.all([
      startGateway('iovalkey', 'standalone', upstreams, {
        identity: { order: ['pubkey', 'ip'] },
        quotas: quotas('a'),
        nostr: { maxInvalidEvents: 1000 },
      }),
      startGateway('valkey-glide', 'cluster', upstreams, {
        identity: { order: ['pubkey', 'ip'] },
        quotas: quotas('b'),
        nostr: { maxInvalidEvents: 5 },
      }),
    ]);
  });

  after(async () => {
    for (const c of clients) c.close();
    await Promise.allSettled([gw?.proc.stop(), cutOff?.proc.stop()]);
    await relay?.stop();
  });

  it('charges the sender before verifying: past its quota, forgeries are not verified', async () => {
    const attacker = await NostrClient.connect(gw.url, '127.0.11.2');
    clients.push(attacker);
    const before = await metricValue(gw, 'sluice_frames_total', 'type="INVALID_SIGNATURE"');
    const sent = 40;
    for (let i = 0; i < sent; i++) attacker.send(['EVENT', forged(i)]);
    await attacker.until((m) => m.filter((x) => x[0] === 'OK').length === sent);
    const prefixes = attacker.oks().map((ok) => String(ok[3]).split(':')[0]);
    assert.equal(prefixes.filter((p) => p === 'invalid').length, LIMIT, 'verified while charged');
    assert.equal(prefixes.filter((p) => p === 'rate-limited').length, sent - LIMIT);
    assert.ok(
      attacker.oks().every((ok) => ok[2] === false),
      'no forgery is accepted',
    );
    const verifiedAndFailed =
      (await metricValue(gw, 'sluice_frames_total', 'type="INVALID_SIGNATURE"')) - before;
    assert.equal(verifiedAndFailed, LIMIT, 'only the charged forgeries were verified');

    const usage = JSON.parse((await admin(gw, 'GET', '/admin/clients/ip:127.0.11.2')).body) as {
      write: { consumed: number };
    };
    assert.ok(usage.write.consumed >= LIMIT, 'every forgery was charged to its address');

    // Everyone else is served as before.
    const honest = await NostrClient.connect(gw.url, '127.0.11.3');
    clients.push(honest);
    const ok = finalizeEvent(
      { kind: 1, created_at: Math.floor(Date.now() / 1000), tags: [], content: 'honest' },
      generateSecretKey(),
    );
    honest.send(['EVENT', ok]);
    await honest.until((m) => m.some((x) => x[0] === 'OK' && x[1] === ok.id && x[2] === true));
  });

  it("forgeries in a known author's name go to the relay on their hash: the author is refunded, the forger closed", async () => {
    // The victim writes once: this gateway now knows it has room, so events in its name are
    // charged to it on their hash alone, and the relay verifies them.
    const sk = generateSecretKey();
    const victimKey = getPublicKey(sk);
    const victim = await NostrClient.connect(cutOff.url, '127.0.11.5');
    clients.push(victim);
    const sign = (n: number) =>
      finalizeEvent(
        { kind: 1, created_at: Math.floor(Date.now() / 1000), tags: [], content: `mine ${n}` },
        sk,
      );
    const first = sign(0);
    victim.send(['EVENT', first]);
    await victim.until((m) => m.some((x) => x[0] === 'OK' && x[1] === first.id));
    // Its id is the hash of its content and its pubkey the victim's; the signature is not.
    const inVictimsName = (n: number) => inNameOf(victimKey, `not mine ${n}`, forged(n).sig);
    const attacker = await RawNostr.open(cutOff.url, '127.0.11.6');
    const gone = new Promise<void>((resolve) => attacker.socket.once('close', () => resolve()));
    for (let i = 0; i < 5; i++) attacker.send(['EVENT', inVictimsName(i)]);
    await gone;
    const oks = attacker.received.filter((m) => m[0] === 'OK');
    assert.equal(oks.length, 5, `each answered: ${JSON.stringify(attacker.received)}`);
    assert.ok(oks.every((ok) => ok[2] === false && /^invalid:/.test(String(ok[3]))));
    const notice = attacker.received.find((m) => m[0] === 'NOTICE');
    assert.match(String(notice?.[1]), /^restricted: too many events that do not verify/);
    // Every forgery's charge went back: the victim pays for its one event, and writes on. The
    // points go back to this gateway's lease (held, unspent) before Valkey sees them.
    const deadline = Date.now() + 10_000;
    let consumed = -1;
    while (Date.now() < deadline) {
      const usage = await admin(cutOff, 'GET', `/admin/clients/pk:${victimKey}`);
      const { write } = JSON.parse(usage.body) as {
        write: { consumed: number; lease?: { held: number } | null };
      };
      consumed = write.consumed - (write.lease?.held ?? 0);
      if (consumed === 1) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(consumed, 1, "the victim's counter holds its own event only");
    const next = sign(1);
    victim.send(['EVENT', next]);
    await victim.until((m) => m.some((x) => x[0] === 'OK' && x[1] === next.id));
    assert.equal(victim.oks().find((ok) => ok[1] === next.id)?.[2], true, 'the victim is served');
  });

  it('forgeries in the name of an author over its limit are refused unverified: nothing counted, the sender pays', async () => {
    const sk = generateSecretKey();
    const author = getPublicKey(sk);
    const sign = (n: number) =>
      finalizeEvent(
        { kind: 1, created_at: Math.floor(Date.now() / 1000), tags: [], content: `over ${n}` },
        sk,
      );
    // The author spends its limit from two addresses (neither reaches its own), one more is
    // refused: this gateway now knows it is over.
    const [a, b] = await Promise.all([
      NostrClient.connect(gw.url, '127.0.11.7'),
      NostrClient.connect(gw.url, '127.0.11.8'),
    ]);
    clients.push(a, b);
    const own = Array.from({ length: LIMIT + 1 }, (_, n) => sign(n));
    for (const [i, e] of own.slice(0, LIMIT).entries()) {
      assert.equal((await (i % 2 ? b : a).okFor(e.id, ['EVENT', e]))[2], true);
    }
    const last = await (LIMIT % 2 ? b : a).okFor(own[LIMIT]!.id, ['EVENT', own[LIMIT]]);
    assert.match(String(last[3]), /^rate-limited:/);

    const before = await metricValue(gw, 'sluice_frames_total', 'type="INVALID_SIGNATURE"');
    const attacker = await RawNostr.open(gw.url, '127.0.11.9');
    const inAuthorsName = (n: number) => inNameOf(author, `not the author's ${n}`, forged(n).sig);
    for (let i = 0; i < 5; i++) {
      const event = inAuthorsName(i);
      attacker.send(['EVENT', event]);
      const ok = await attacker.okFor(event.id);
      assert.equal(ok[2], false);
      assert.match(String(ok[3]), /^rate-limited:/, 'refused before any check');
    }
    // A replay of the author's own stored event is still a duplicate.
    attacker.send(['EVENT', own[0]]);
    assert.match(String((await attacker.okFor(own[0]!.id))[3]), /^duplicate:/);
    assert.equal(
      await metricValue(gw, 'sluice_frames_total', 'type="INVALID_SIGNATURE"'),
      before,
      'none of them was verified',
    );
    assert.equal(attacker.socket.destroyed, false, 'nothing counted against the connection');
    const usage = JSON.parse((await admin(gw, 'GET', '/admin/clients/ip:127.0.11.9')).body) as {
      write: { consumed: number; lease?: { held: number } | null };
    };
    assert.equal(usage.write.consumed - (usage.write.lease?.held ?? 0), 6, 'the sender paid each');
  });

  it('closes a connection (1008, with a NOTICE) after the configured number of forgeries', async () => {
    const attacker = await NostrClient.connect(cutOff.url, '127.0.11.4');
    clients.push(attacker);
    const gone = closed(attacker);
    for (let i = 0; i < 5; i++) attacker.send(['EVENT', forged(i)]);
    assert.equal(await gone, 1008);
    assert.equal(attacker.oks().length, 5, 'every forgery was answered before the close');
    const notice = attacker.received.find((m) => m[0] === 'NOTICE');
    assert.match(String(notice?.[1]), /^restricted: too many events that do not verify/);
  });
});
