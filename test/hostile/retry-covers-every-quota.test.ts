/**
 * Invariant: the retry time a refusal names covers every counter the same write is known to
 * wait for, not only the one that refused first; a client that waits exactly the time it was
 * given is then accepted. Over raw sockets, against a real gateway and Valkey:
 * - Nostr: an EVENT whose sender (its address) refuses first, while its author's quota, not
 *   charged yet, is known exhausted for longer (this gateway charged it to the limit);
 * - HTTP: a write whose address and /24 range both refuse, the range for longer (its window
 *   is longer), the address named first.
 *
 * Mutations tried: quotaRefusal without `authorShort` (the author not yet charged left out):
 * the Nostr client is told the address's time and refused by its author then (fails).
 * chargeWrite's refusal without `longestWait` (the first refusal's time): the HTTP client is
 * told the address's time and refused by the range then (fails).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { generateSecretKey } from 'nostr-tools/pure';
import type { Event } from 'nostr-tools/pure';
import { startGateway } from '../helpers/gateway.js';
import type { GatewayUnderTest } from '../helpers/gateway.js';
import { signedEvent } from '../helpers/nostr-events.js';
import { startRelay } from '../helpers/processes.js';
import type { RelayProcess } from '../helpers/processes.js';
import { rawRequest } from '../helpers/raw-http.js';
import { RawNostr } from '../helpers/raw-nostr.js';

/** Nostr: the address and the author each write 2 per AUTHOR_WINDOW_SEC. */
const AUTHOR_WINDOW_SEC = 6;
/**
 * HTTP: an address writes 2 per ADDRESS_WINDOW_SEC, its /24 RANGE_POINTS per RANGE_WINDOW_SEC
 * (no fewer a second than one address: the configuration's own rule).
 */
const ADDRESS_WINDOW_SEC = 2;
const RANGE_WINDOW_SEC = 8;
const RANGE_POINTS = 8;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The next OK for `id` on `client` after the `seen` OKs already received for it. */
async function nextOk(client: RawNostr, id: string, seen: number): Promise<unknown[]> {
  const oks = (msgs: unknown[][]) => msgs.filter((m) => m[0] === 'OK' && m[1] === id);
  await client.until(`OK ${id.slice(0, 8)} #${seen + 1}`, (msgs) => oks(msgs).length > seen);
  return oks(client.received)[seen]!;
}

const retryIn = (text: string) => Number(/retry in (\d+) ?s\b/.exec(text)?.[1] ?? NaN);

describe('a retry time covers every quota the write waits for', { timeout: 120_000 }, () => {
  let relay: RelayProcess;
  let nostr: GatewayUnderTest;
  let http: GatewayUnderTest;
  const open: RawNostr[] = [];

  before(async () => {
    relay = await startRelay({ nodeId: 'relay-a' });
    const upstreams = [{ id: 'relay-a', url: relay.url }];
    const tag = Date.now().toString(36);
    [nostr, http] = await Promise.all([
      startGateway('iovalkey', 'standalone', upstreams, {
        identity: { order: ['pubkey', 'ip'] },
        quotas: {
          keyPrefix: `covers-author${tag}`,
          tiers: { default: { write: { points: 2, windowSec: AUTHOR_WINDOW_SEC } } },
        },
      }),
      startGateway('iovalkey', 'standalone', upstreams, {
        quotas: {
          keyPrefix: `covers-range${tag}`,
          tiers: { default: { write: { points: 2, windowSec: ADDRESS_WINDOW_SEC } } },
          ranges: {
            enabled: true,
            ipv4: [
              { prefixLength: 24, write: { points: RANGE_POINTS, windowSec: RANGE_WINDOW_SEC } },
            ],
          },
        },
      }),
    ]);
  });

  after(async () => {
    for (const c of open) c.close();
    await Promise.all([nostr?.proc.stop(), http?.proc.stop()]);
    await relay?.stop();
  });

  it("Nostr: the address refuses first; the time given covers the author's quota", async () => {
    const sender = await RawNostr.open(nostr.url, '127.0.44.2');
    const other = await RawNostr.open(nostr.url, '127.0.44.3');
    open.push(sender, other);
    const write = async (client: RawNostr, e: Event) => {
      const seen = client.received.filter((m) => m[0] === 'OK' && m[1] === e.id).length;
      client.send(['EVENT', e]);
      return nextOk(client, e.id, seen);
    };
    // The sender's address spends its quota first (others' events)...
    for (let i = 0; i < 2; i++) {
      assert.equal((await write(sender, signedEvent(1, `own ${i}`)))[2], true);
    }
    // ...then, later, another address spends the author's: the author's window ends later.
    await sleep((AUTHOR_WINDOW_SEC / 2) * 1000);
    const author = generateSecretKey();
    for (let i = 0; i < 2; i++) {
      assert.equal((await write(other, signedEvent(1, `author ${i}`, author)))[2], true);
    }
    const event = signedEvent(1, 'the author, from the spent address', author);
    const refusal = await write(sender, event);
    assert.equal(refusal[2], false, JSON.stringify(refusal));
    const sec = retryIn(String(refusal[3]));
    assert.ok(sec >= 1 && sec <= AUTHOR_WINDOW_SEC, String(refusal[3]));
    // Waits exactly the time it was given, then sends the same event: accepted.
    await sleep(sec * 1000);
    const retried = await write(sender, event);
    assert.equal(retried[2], true, `after ${sec} s: ${JSON.stringify(retried)}`);
  });

  it('HTTP: the address is named first; the time given covers its /24 range', async () => {
    const post = (from: string) =>
      rawRequest(
        http.url,
        'POST /ingest HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n' +
          'Content-Length: 2\r\nConnection: close\r\n\r\n{}',
        from,
      );
    const admitted = (status: number) => status !== 429;
    // Other addresses of the /24 start the range's window; the client spends its own and the
    // range's last points.
    for (let i = 0; i < RANGE_POINTS - 2; i++) {
      assert.ok(admitted((await post(`127.0.45.${10 + (i >> 1)}`)).status));
    }
    for (let i = 0; i < 2; i++) assert.ok(admitted((await post('127.0.45.2')).status));
    const refused = await post('127.0.45.2');
    assert.equal(refused.status, 429, refused.body);
    const sec = Number(refused.headers['retry-after']);
    assert.ok(sec >= 1 && sec <= RANGE_WINDOW_SEC, JSON.stringify(refused.headers));
    assert.equal(retryIn(refused.body), sec, refused.body);
    await sleep(sec * 1000);
    const retried = await post('127.0.45.2');
    assert.ok(admitted(retried.status), `after ${sec} s: ${retried.status} ${retried.body}`);
  });
});
