/**
 * Attacks on the answers clients act on (issue 34, part 4), over raw sockets:
 * - a flood of NIP-46 signing events (kind 24133, exempt from every write quota by default)
 *   from one address: the free path is still bounded by the address's frame rate, each refusal
 *   naming its retry time, and another client's signing traffic passes;
 * - a client at its write quota still gets its signing events through;
 * - a bouncer sending a refused write again at once, 30 times a second (Yonle/bostr #12): it
 *   gets fewer answers than it sends, is closed (1008, rate-limited:) past the bound, and
 *   another client writes meanwhile; an honest client that waits the time it was given is
 *   served;
 * - the same bouncer over POST /events: its early copy is held, then answered 429 with
 *   Retry-After and RateLimit headers, unjudged; past the bound on a keep-alive connection, its
 *   answer says `Connection: close` and the connection closes, while another client's keep-alive
 *   connection writes meanwhile.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { generateSecretKey } from 'nostr-tools/pure';
import type { Event } from 'nostr-tools/pure';
import { NostrClient, startGateway } from '../helpers/gateway.js';
import type { GatewayUnderTest } from '../helpers/gateway.js';
import { signedEvent } from '../helpers/nostr-events.js';
import { startRelay } from '../helpers/processes.js';
import type { RelayProcess } from '../helpers/processes.js';
import { RawConnection, rawRequest } from '../helpers/raw-http.js';
import { RawNostr } from '../helpers/raw-nostr.js';

const FRAMES_PER_SEC = 20;
const BOUNCE_WINDOW_SEC = 10;
const HOLD_MS = 500;
const MAX_EARLY = 8;

const okOf = (msgs: unknown[][], id: string) => msgs.filter((m) => m[0] === 'OK' && m[1] === id);
const oks = (msgs: unknown[][]) => msgs.filter((m) => m[0] === 'OK');

function socketClosed(raw: RawNostr, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    if (raw.socket.destroyed || raw.socket.readableEnded) return resolve();
    const timer = setTimeout(() => reject(new Error('the gateway did not close')), timeoutMs);
    raw.socket.once('close', () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

describe('answers clients can act on, attacked', { timeout: 120_000 }, () => {
  let relay: RelayProcess;
  let exempt: GatewayUnderTest;
  let bounce: GatewayUnderTest;
  const open: { close(): void }[] = [];

  before(async () => {
    relay = await startRelay({ nodeId: 'relay-a' });
    const upstreams = [{ id: 'relay-a', url: relay.url }];
    const tag = Date.now().toString(36);
    [exempt, bounce] = await Promise.all([
      startGateway('iovalkey', 'standalone', upstreams, {
        identity: { order: ['pubkey', 'ip'] },
        quotas: {
          keyPrefix: `exempt${tag}`,
          tiers: { default: { write: { points: 2, windowSec: 60 } } },
        },
        limits: { framesPerSecPerAddress: FRAMES_PER_SEC },
      }),
      startGateway('iovalkey', 'standalone', upstreams, {
        quotas: {
          keyPrefix: `bounce${tag}`,
          tiers: { default: { write: { points: 1, windowSec: BOUNCE_WINDOW_SEC } } },
        },
        limits: { earlyRetries: { holdMs: HOLD_MS, max: MAX_EARLY, windowSec: 60 } },
      }),
    ]);
  });

  after(async () => {
    for (const c of open) c.close();
    await Promise.all([exempt?.proc.stop(), bounce?.proc.stop()]);
    await relay?.stop();
  });

  it('a flood of kind 24133 from one address meets its frame rate; another signs', async () => {
    const sk = generateSecretKey();
    const flood: Event[] = Array.from({ length: 120 }, (_, i) =>
      signedEvent(24133, `flood ${i}`, sk),
    );
    const flooder = await RawNostr.open(exempt.url, '127.0.40.2');
    const signer = await NostrClient.connect(exempt.url, '127.0.40.3');
    open.push(flooder, signer);
    const started = Date.now();
    for (const e of flood) flooder.send(['EVENT', e]);
    // Every EVENT is answered once: by the relay, or by the gateway's frame-rate refusal.
    await flooder.until('an OK for each', (msgs) => oks(msgs).length >= flood.length, 20_000);
    const seconds = Math.ceil((Date.now() - started) / 1000) + 1;
    const accepted = oks(flooder.received).filter((m) => m[2] === true);
    const refused = oks(flooder.received).filter((m) => m[2] === false);
    assert.ok(
      accepted.length <= FRAMES_PER_SEC * seconds,
      `${accepted.length} accepted in ${seconds} s windows of ${FRAMES_PER_SEC}`,
    );
    assert.ok(refused.length >= flood.length - FRAMES_PER_SEC * seconds);
    for (const m of refused) {
      assert.match(
        String(m[3]),
        /^rate-limited: too many messages from this address; retry in 1s$/,
      );
    }
    // Another address's signing traffic passes meanwhile, none of it charged.
    const skSigner = generateSecretKey();
    for (let i = 0; i < 5; i++) {
      const e = signedEvent(24133, `sign ${i}`, skSigner);
      const ok = await signer.okFor(e.id, ['EVENT', e]);
      assert.equal(ok[2], true, JSON.stringify(ok));
    }
  });

  it('a client at its write quota still gets its signing events through', async () => {
    const client = await NostrClient.connect(exempt.url, '127.0.40.4');
    open.push(client);
    const sk = generateSecretKey();
    let refusal: unknown[] | undefined;
    for (let i = 0; i < 4 && !refusal; i++) {
      const e = signedEvent(1, `note ${i}`, sk);
      const ok = await client.okFor(e.id, ['EVENT', e]);
      if (ok[2] === false) refusal = ok;
    }
    assert.ok(refusal, 'the write quota refuses a note');
    assert.match(
      String(refusal[3]),
      /^rate-limited: write quota of 2 per 60s used up; retry in \d+s$/,
    );
    for (let i = 0; i < 3; i++) {
      const e = signedEvent(24133, `signing ${i}`, sk);
      const ok = await client.okFor(e.id, ['EVENT', e]);
      assert.equal(ok[2], true, `kind 24133 at quota: ${JSON.stringify(ok)}`);
    }
    const note = signedEvent(1, 'still over', sk);
    assert.equal((await client.okFor(note.id, ['EVENT', note]))[2], false, 'the quota holds');
  });

  it('a bouncer gets fewer answers than it sends, then a close; others are served', async () => {
    const bouncer = await RawNostr.open(bounce.url, '127.0.41.2');
    const writer = await NostrClient.connect(bounce.url, '127.0.41.3');
    open.push(bouncer, writer);
    const first = signedEvent(1, 'bouncer first');
    const refusedOne = signedEvent(1, 'bouncer second');
    bouncer.send(['EVENT', first]);
    assert.equal((await bouncer.okFor(first.id))[2], true);
    bouncer.send(['EVENT', refusedOne]);
    const refusal = await bouncer.okFor(refusedOne.id);
    assert.match(
      String(refusal[3]),
      /^rate-limited: write quota of 1 per 10s used up; retry in \d+s$/,
    );

    // 30 copies a second for two seconds, at once after the refusal.
    const sentAt = Date.now();
    let sent = 0;
    await new Promise<void>((resolve) => {
      const timer = setInterval(() => {
        bouncer.send(['EVENT', refusedOne]);
        if (++sent >= 60) {
          clearInterval(timer);
          resolve();
        }
      }, 1000 / 30);
    });
    const bounceMs = Date.now() - sentAt;
    const answered = okOf(bouncer.received, refusedOne.id).length - 1;
    assert.ok(
      // The first early copy is answered at once (a resend on reconnect looks like it), the
      // rest one a hold each.
      answered <= Math.ceil(bounceMs / HOLD_MS) + 2,
      `${answered} answers to ${sent} copies in ${bounceMs} ms`,
    );
    for (const m of okOf(bouncer.received, refusedOne.id).slice(1)) {
      assert.match(String(m[3]), /^rate-limited: sent again before the time given; retry in \d+s$/);
    }

    // Another address writes meanwhile, answered at once.
    const mine = signedEvent(1, 'an honest write');
    const t0 = Date.now();
    assert.equal((await writer.okFor(mine.id, ['EVENT', mine]))[2], true);
    assert.ok(Date.now() - t0 < 2000, 'the other client is not slowed');

    // Past MAX_EARLY early copies the bouncer is closed, saying why.
    await socketClosed(bouncer, (MAX_EARLY + 2) * HOLD_MS + 5000);
    const notice = bouncer.received.find((m) => m[0] === 'NOTICE');
    assert.match(
      String(notice?.[1]),
      /^rate-limited: writes sent again before the time given; closing the connection$/,
    );
  });

  it('an honest client that waits the time it was given is served', async () => {
    const client = await RawNostr.open(bounce.url, '127.0.41.4');
    open.push(client);
    const first = signedEvent(1, 'patient first');
    const second = signedEvent(1, 'patient second');
    client.send(['EVENT', first]);
    assert.equal((await client.okFor(first.id))[2], true);
    client.send(['EVENT', second]);
    const refusal = await client.okFor(second.id);
    const sec = Number(/retry in (\d+)s/.exec(String(refusal[3]))?.[1]);
    assert.ok(sec >= 1 && sec <= BOUNCE_WINDOW_SEC, String(refusal[3]));
    // The client does as it was told: waits that long, then sends the same write again.
    await new Promise((r) => setTimeout(r, sec * 1000));
    const before = client.received.length;
    client.send(['EVENT', second]);
    await client.until(
      'the retry answered',
      (msgs) => okOf(msgs.slice(before), second.id).length > 0,
    );
    const ok = okOf(client.received.slice(before), second.id)[0]!;
    assert.equal(ok[2], true, JSON.stringify(ok));
  });

  it('a bouncer over POST /events is held and answered 429 with when to retry', async () => {
    const post = (e: Event) => {
      const body = JSON.stringify(e);
      return rawRequest(
        bounce.url,
        `POST /events HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n` +
          `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
        '127.0.41.5',
      );
    };
    const first = await post(signedEvent(1, 'http first'));
    assert.ok(first.status < 300, `${first.status} ${first.body}`);
    const second = signedEvent(1, 'http second');
    const refused = await post(second);
    assert.equal(refused.status, 429, refused.body);
    assert.ok(Number(refused.headers['retry-after']) >= 1);
    const once = await post(second);
    assert.equal(once.status, 429, once.body);
    assert.match(once.body, /sent again before the time given/);
    // Its second early copy is a bouncer's: held.
    const t0 = Date.now();
    const early = await post(second);
    const heldMs = Date.now() - t0;
    assert.equal(early.status, 429, early.body);
    assert.match(early.body, /sent again before the time given; retry in \d+s/);
    assert.ok(Number(early.headers['retry-after']) >= 1, JSON.stringify(early.headers));
    assert.ok(early.headers.ratelimit, 'RateLimit headers on an early retry too');
    assert.ok(heldMs >= HOLD_MS - 50, `held ${heldMs} ms`);
  });

  it('a bouncer on one keep-alive connection is answered, then closed; others write', async () => {
    const request = (e: Event) => {
      const body = JSON.stringify(e);
      return (
        `POST /events HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
      );
    };
    const bouncer = await RawConnection.open(bounce.url, '127.0.41.6');
    const other = await RawConnection.open(bounce.url, '127.0.41.7');
    open.push({ close: () => bouncer.destroy() }, { close: () => other.destroy() });
    bouncer.write(request(signedEvent(1, 'keep-alive first')));
    const first = await bouncer.response();
    assert.ok(first.status < 300, `${first.status} ${first.body}`);
    const refusedOne = signedEvent(1, 'keep-alive second');
    bouncer.write(request(refusedOne));
    assert.equal((await bouncer.response()).status, 429);

    // Early copies, one after another's answer on the same connection: up to MAX_EARLY of
    // them are answered 429 and keep the connection; the one past it is answered, then closed.
    const answers = [];
    for (let i = 0; i <= MAX_EARLY && !bouncer.closed; i++) {
      bouncer.write(request(refusedOne));
      answers.push(await bouncer.response((MAX_EARLY + 2) * HOLD_MS + 5000));
    }
    assert.equal(answers.length, MAX_EARLY + 1, 'each early copy answered');
    for (const a of answers.slice(0, MAX_EARLY)) {
      assert.equal(a.status, 429, a.body);
      assert.notEqual(a.headers.connection, 'close', 'within the bound the connection stays');
      assert.match(a.body, /sent again before the time given; retry in \d+s/);
    }
    const last = answers[MAX_EARLY]!;
    assert.equal(last.status, 429, last.body);
    assert.equal(last.headers.connection, 'close', JSON.stringify(last.headers));
    assert.ok(Number(last.headers['retry-after']) >= 1, JSON.stringify(last.headers));
    assert.match(
      last.body,
      /writes sent again before the time given; retry in \d+s from a new connection; closing this one/,
    );
    await bouncer.untilClosed(5000);

    // Another client's keep-alive connection writes meanwhile, and stays open.
    for (let i = 0; i < 2; i++) {
      const t0 = Date.now();
      other.write(request(signedEvent(1, `other keep-alive ${i}`, generateSecretKey())));
      const ok = await other.response();
      // One write per 10 s for this address: the second is refused by quota, not closed.
      assert.equal(ok.status, i === 0 ? 200 : 429, ok.body);
      assert.ok(Date.now() - t0 < 2000, 'the other client is not slowed');
    }
    assert.equal(other.closed, false);
  });
});
