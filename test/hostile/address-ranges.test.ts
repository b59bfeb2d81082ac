/**
 * Attack: rent a /56 (256 /64s for under $20 a month) and be a new client on every write by
 * rotating through its /64s; or rotate the /56s of a /48. With quotas.ranges on, every write of
 * an address also pays the /56 and /48 holding it (IPv4: the /24), and the tightest refuses: the
 * flood is held to its /56's limit (then its /48's) while another /48 writes as freely as ever.
 * Every write here is sent over a raw socket, through X-Forwarded-For from the trusted loopback
 * proxy, as an HTTP write, an event POSTed over HTTP, and a Nostr EVENT.
 *
 * What ranges cannot hold, by design: a flood rotating whole /48s (each a fresh /48 limit).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { generateSecretKey } from 'nostr-tools/pure';
import { suiteRelayAndGateway } from '../helpers/gateway.js';
import { signedEvent } from '../helpers/nostr-events.js';
import { rawRequest } from '../helpers/raw-http.js';
import type { RawResponse } from '../helpers/raw-http.js';
import { RawNostr } from '../helpers/raw-nostr.js';

/** Per /64 (the default tier), per /56, per /48 and per IPv4 /24, a minute each. */
const PER_CLIENT = 3;
const PER_56 = 6;
const PER_48 = 12;
const PER_24 = 6;

const limit = (points: number) => ({ points, windowSec: 60 });

describe('nested address ranges, over raw sockets', { timeout: 120_000 }, () => {
  const suite = suiteRelayAndGateway({
    trustedProxies: ['127.0.0.1'],
    quotas: {
      keyPrefix: `ranges${Date.now().toString(36)}`,
      tiers: { default: { write: limit(PER_CLIENT) } },
      ranges: {
        enabled: true,
        ipv6: [
          { prefixLength: 56, write: limit(PER_56) },
          { prefixLength: 48, write: limit(PER_48) },
        ],
        ipv4: [{ prefixLength: 24, write: limit(PER_24) }],
      },
    },
    limits: { framesPerSecPerAddress: 1000 },
  });
  const gw = () => suite.gw();

  /**
   * One plain HTTP write (the relay answers 404 for /ingest: anything but 429 is admitted),
   * sent by hand from `peer` with this X-Forwarded-For.
   */
  function httpWrite(xff: string, peer = '127.0.0.1'): Promise<RawResponse> {
    const { host } = new URL(gw().url);
    const text =
      `POST /ingest HTTP/1.1\r\nHost: ${host}\r\nX-Forwarded-For: ${xff}\r\n` +
      'Content-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}';
    return rawRequest(gw().url, text, peer);
  }

  /** One signed event POSTed to /events by hand. */
  function httpEvent(xff: string): Promise<RawResponse> {
    const { host } = new URL(gw().url);
    const body = JSON.stringify(signedEvent(1, `http ${xff}`, generateSecretKey()));
    const text =
      `POST /events HTTP/1.1\r\nHost: ${host}\r\nX-Forwarded-For: ${xff}\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
      `Connection: close\r\n\r\n${body}`;
    return rawRequest(gw().url, text);
  }

  /** One EVENT on a raw WebSocket opened with this X-Forwarded-For: its OK (true or not). */
  async function nostrEvent(xff: string): Promise<{ ok: boolean; message: string }> {
    const client = await RawNostr.open(gw().url, '127.0.0.1', { 'X-Forwarded-For': xff });
    try {
      const event = signedEvent(1, `ws ${xff}`, generateSecretKey());
      client.send(['EVENT', event]);
      const [, , ok, message] = await client.okFor(event.id);
      return { ok: ok === true, message: String(message) };
    } finally {
      client.close();
    }
  }

  const admitted = (r: RawResponse) => r.status !== 429;

  /** How many of `writes` were admitted, sent one after another. */
  async function countAdmitted(writes: (() => Promise<boolean>)[]): Promise<number> {
    let n = 0;
    for (const write of writes) if (await write()) n++;
    return n;
  }

  it('HTTP: a flood rotating /64s of one /56 is held to the /56; another /48 writes freely', async () => {
    const flood = Array.from({ length: 20 }, (_, i) => async () => {
      const r = await httpWrite(`2001:db8:a:1${i.toString(16).padStart(2, '0')}::1`);
      if (!admitted(r)) {
        assert.match(r.headers['ratelimit-policy'] ?? '', new RegExp(`q=${PER_56};w=60`));
        assert.ok(Number(r.headers['retry-after']) >= 1, 'a range refusal says when to retry');
      }
      return admitted(r);
    });
    assert.equal(await countAdmitted(flood), PER_56, 'the /56 admits its limit, no more');
    // Another /48: its honest client writes its own limit, none refused by the flood's ranges.
    const honest = Array.from(
      { length: PER_CLIENT },
      () => async () => admitted(await httpWrite('2001:db8:b:1::7')),
    );
    assert.equal(await countAdmitted(honest), PER_CLIENT, 'another /48 is untouched');
    assert.equal(admitted(await httpWrite('2001:db8:b:1::7')), false, 'and meets its own limit');
  });

  it('HTTP events: the same flood POSTed to /events is held to the /56', async () => {
    const flood = Array.from(
      { length: 16 },
      (_, i) => async () =>
        admitted(await httpEvent(`2001:db8:a2:1${i.toString(16).padStart(2, '0')}::1`)),
    );
    assert.equal(await countAdmitted(flood), PER_56);
    assert.equal(admitted(await httpEvent('2001:db8:b2:1::7')), true, 'another /48 writes');
  });

  it('Nostr EVENT: a flood rotating /64s is held to the /56 with rate-limited: OKs', async () => {
    const refusals: string[] = [];
    const flood = Array.from({ length: 14 }, (_, i) => async () => {
      const ok = await nostrEvent(`2001:db8:a3:1${i.toString(16).padStart(2, '0')}::1`);
      if (!ok.ok) refusals.push(ok.message);
      return ok.ok;
    });
    assert.equal(await countAdmitted(flood), PER_56);
    for (const message of refusals) assert.match(message, /^rate-limited: /);
    const honest = Array.from(
      { length: PER_CLIENT },
      () => async () => (await nostrEvent('2001:db8:b3:1::7')).ok,
    );
    assert.equal(await countAdmitted(honest), PER_CLIENT, 'another /48 writes its own limit');
  });

  it('a flood rotating /56s of one /48 is held to the /48', async () => {
    // Each /56 writes two (below its own limit): only the /48 can hold them.
    const flood = Array.from({ length: 12 }, (_, i) =>
      [0, 1].map(
        (h) => async () => admitted(await httpWrite(`2001:db8:c:${(i << 8).toString(16)}${h}::1`)),
      ),
    ).flat();
    assert.equal(await countAdmitted(flood), PER_48, 'the /48 admits its limit, no more');
    assert.equal(admitted(await httpWrite('2001:db8:d::1')), true, 'another /48 writes');
  });

  it('what ranges cannot hold: a flood rotating whole /48s gets each its own /48', async () => {
    const flood = Array.from(
      { length: 8 },
      (_, i) => async () => admitted(await httpWrite(`2001:db8:${(0x100 + i).toString(16)}::1`)),
    );
    assert.equal(await countAdmitted(flood), 8, 'every fresh /48 is a fresh range (documented)');
  });

  it('spellings of one range are one range: expanded, upper case, zone ids, ports, v4-mapped', async () => {
    const spellings = [
      '2001:db8:e:100::1',
      '2001:0DB8:000E:0101:0000:0000:0000:0001',
      '2001:db8:e:102:0:0:0:1',
      '2001:DB8:E:103::abcd',
      '2001:db8:e:104::1%eth0',
      '2001:db8:e:105::ffff:1.2.3.4',
      '2001:db8:e:106::1',
      '[2001:0db8:000e:0107::0001]:443',
      '[2001:db8:e:108::1]',
    ];
    const writes = spellings.map((s) => async () => admitted(await httpWrite(s)));
    assert.equal(await countAdmitted(writes), PER_56, 'no spelling is a fresh /56');
    // IPv4-mapped IPv6 is the IPv4 address, in the IPv4 address's /24.
    const v4 = [
      '198.51.100.1',
      '::ffff:198.51.100.2',
      '::FFFF:c633:6403',
      '198.51.100.4:5678',
      '0:0:0:0:0:ffff:198.51.100.5',
      '[::ffff:198.51.100.6]:443',
      '198.51.100.7',
      '::ffff:198.51.100.8',
    ];
    const v4writes = v4.map((a) => async () => admitted(await httpWrite(a)));
    assert.equal(await countAdmitted(v4writes), PER_24, 'a mapped address is in its /24');
  });

  it('IPv4: rotating addresses of one /24 is held to the /24; another /24 writes freely', async () => {
    const flood = Array.from(
      { length: 20 },
      (_, i) => async () => admitted(await httpWrite(`203.0.113.${i + 1}`)),
    );
    assert.equal(await countAdmitted(flood), PER_24);
    const honest = Array.from(
      { length: PER_CLIENT },
      () => async () => admitted(await httpWrite('192.0.2.77')),
    );
    assert.equal(await countAdmitted(honest), PER_CLIENT, 'another /24 is untouched');
  });

  it('a forwarded-for chain: spoofed hops are not the client; an untrusted peer is itself', async () => {
    // From the trusted proxy, the client is the nearest untrusted hop: the rotating /64 at the
    // chain's end, whatever addresses of other networks the flood writes before it.
    const chained = Array.from({ length: 12 }, (_, i) => async () => {
      const victim = `2001:db8:f0:${i.toString(16)}::1`;
      return admitted(
        await httpWrite(`${victim}, 2001:db8:f1:1${i.toString(16).padStart(2, '0')}::9`),
      );
    });
    assert.equal(await countAdmitted(chained), PER_56, 'held to the /56 of the last hop');
    assert.equal(
      admitted(await httpWrite('2001:db8:f0:1::1')),
      true,
      'the spoofed /48 was not charged',
    );
    // An untrusted peer's X-Forwarded-For is ignored: it is its own address, in its own /24.
    const untrusted = Array.from(
      { length: 10 },
      (_, i) => async () =>
        admitted(
          await httpWrite(`2001:db8:f2:1${i.toString(16).padStart(2, '0')}::1`, '127.0.3.1'),
        ),
    );
    assert.equal(
      await countAdmitted(untrusted),
      PER_CLIENT,
      'the peer is charged, its chain is not',
    );
  });
});
