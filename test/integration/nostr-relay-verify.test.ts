/**
 * nostr.verify relay: the gateway does not check signatures; the relay does, and its `OK`
 * true is what charges the event's author. Forgeries and duplicates, which the relay does not
 * accept as new, charge no author. And with quotas off, `auto` verifies nothing (nothing
 * needs the author), so the relay is the one that turns a forgery away.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { finalizeEvent, generateSecretKey } from 'nostr-tools/pure';
import type { Event } from 'nostr-tools/pure';
import { NostrClient, metricValue, startGateway } from '../helpers/gateway.js';
import type { GatewayUnderTest } from '../helpers/gateway.js';
import { startRelay } from '../helpers/processes.js';
import type { RelayProcess } from '../helpers/processes.js';

const LIMIT = 5;
/** Senders per batch of events: fresh addresses each batch, so no sender reaches its limit. */
const SENDERS = 4;
let lastSender = 0;

function note(key: Uint8Array, content: string): Event {
  return finalizeEvent(
    { kind: 1, created_at: Math.floor(Date.now() / 1000), tags: [], content },
    key,
  );
}

/** A well-formed event of `key`'s pubkey (its id matches) with another key's signature. */
function forgedAs(key: Uint8Array, content: string): Event {
  const other = note(generateSecretKey(), 'x');
  return { ...note(key, content), sig: other.sig };
}

describe('signatures verified by the relay (nostr.verify relay)', { timeout: 90_000 }, () => {
  let relay: RelayProcess;
  let gw: GatewayUnderTest;
  let quotasOff: GatewayUnderTest;
  const clients: NostrClient[] = [];

  /** Send each event from the next sender in turn and wait for its answer; the OKs, in order. */
  async function sendInTurn(events: Event[]): Promise<unknown[][]> {
    assert.ok(events.length <= SENDERS * (LIMIT - 1), 'every sender stays under its own limit');
    const ips = Array.from({ length: SENDERS }, () => `127.0.12.${++lastSender}`);
    const conns = await Promise.all(ips.map((ip) => NostrClient.connect(gw.url, ip)));
    clients.push(...conns);
    const answers: unknown[][] = [];
    for (const [i, event] of events.entries()) {
      const conn = conns[i % conns.length]!;
      const seen = conn.oks().length;
      conn.send(['EVENT', event]);
      await conn.until(() => conn.oks().length > seen);
      const answer = conn.oks()[seen]!;
      assert.equal(answer[1], event.id);
      answers.push(answer);
    }
    return answers;
  }

  before(async () => {
    relay = await startRelay({ nodeId: 'relay-a' });
    const upstreams = [{ id: 'relay-a', url: relay.url }];
    const quotas = (tag: string, enabled: boolean) => ({
      enabled,
      keyPrefix: `relayverify${tag}${Date.now().toString(36)}`,
      tiers: { default: { write: { points: LIMIT, windowSec: 60 } } },
    });
    [gw, quotasOff] = await Promise.all([
      startGateway('iovalkey', 'standalone', upstreams, {
        identity: { order: ['pubkey', 'ip'] },
        quotas: quotas('a', true),
        nostr: { verify: 'relay' },
      }),
      startGateway('iovalkey', 'standalone', upstreams, {
        identity: { order: ['pubkey', 'ip'] },
        quotas: quotas('b', false),
      }),
    ]);
  });

  after(async () => {
    for (const c of clients) c.close();
    await Promise.allSettled([gw?.proc.stop(), quotasOff?.proc.stop()]);
    await relay?.stop();
  });

  it('charges the author when the relay accepts, and refuses it once over its limit', async () => {
    const key = generateSecretKey();
    const events = Array.from({ length: LIMIT + 3 }, (_, i) => note(key, `accepted ${i}`));
    const answers = await sendInTurn(events);
    // One event in flight at a time: the charge of the last accepted one blocks the next.
    assert.deepEqual(
      answers.map((a) => a[2]),
      [...Array<boolean>(LIMIT).fill(true), false, false, false],
      JSON.stringify(answers),
    );
    for (const a of answers.slice(LIMIT)) assert.match(String(a[3]), /^rate-limited:/);
    assert.equal(
      await metricValue(gw, 'sluice_frames_total', 'type="INVALID_SIGNATURE"'),
      0,
      'the gateway verified nothing',
    );
  });

  it('charges no author for forgeries the relay turns away', async () => {
    const key = generateSecretKey();
    const forgeries = Array.from({ length: LIMIT + 2 }, (_, i) => forgedAs(key, `forged ${i}`));
    const refused = await sendInTurn(forgeries);
    for (const a of refused) {
      assert.equal(a[2], false);
      // The relay's own refusal, not the gateway's ("event id or signature does not verify").
      assert.match(String(a[3]), /^invalid: signature verification failed/);
    }
    const genuine = Array.from({ length: LIMIT }, (_, i) => note(key, `genuine ${i}`));
    const accepted = await sendInTurn(genuine);
    assert.ok(
      accepted.every((a) => a[2] === true),
      JSON.stringify(accepted),
    );
  });

  it('charges no author for a replay the relay already has', async () => {
    const key = generateSecretKey();
    const first = note(key, 'replayed');
    const replays = await sendInTurn(Array.from({ length: LIMIT + 2 }, () => first));
    assert.equal(replays[0]![2], true);
    for (const a of replays.slice(1)) {
      assert.equal(a[2], true);
      assert.match(String(a[3]), /^duplicate:/);
    }
    // The first acceptance was the only charge: LIMIT - 1 new events still pass.
    const fresh = Array.from({ length: LIMIT }, (_, i) => note(key, `after replays ${i}`));
    const answers = await sendInTurn(fresh);
    assert.deepEqual(
      answers.map((a) => a[2]),
      [...Array<boolean>(LIMIT - 1).fill(true), false],
      JSON.stringify(answers),
    );
  });

  it('with quotas off, auto verifies nothing: the relay refuses the forgery', async () => {
    const conn = await NostrClient.connect(quotasOff.url, '127.0.13.1');
    clients.push(conn);
    const forgery = forgedAs(generateSecretKey(), 'unverified at the gateway');
    conn.send(['EVENT', forgery]);
    const msgs = await conn.until((m) => m.some((x) => x[0] === 'OK' && x[1] === forgery.id));
    const ok = msgs.find((x) => x[0] === 'OK')!;
    assert.equal(ok[2], false);
    assert.match(String(ok[3]), /^invalid: signature verification failed/);
    assert.equal(
      await metricValue(quotasOff, 'sluice_frames_total', 'type="INVALID_SIGNATURE"'),
      0,
    );
  });
});
