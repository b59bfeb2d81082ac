/**
 * Attack: rotate through the addresses of one IPv6 subscriber network (a /64 holds 2^64 of
 * them) to be a new client, with a fresh quota, on every request. IPv6 clients are counted
 * per network of `identity.ipv6PrefixLength` bits (64 by default): two addresses of one /64
 * share one quota, two /64s do not. Unit tests pin the spelling of the masked network.
 */
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { isIPv6 } from 'node:net';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { ClientAddress, clientNetwork } from '../../src/gateway/client-address.js';
import { request, startGateway } from '../helpers/gateway.js';
import type { GatewayUnderTest } from '../helpers/gateway.js';
import { startRelay } from '../helpers/processes.js';
import type { RelayProcess } from '../helpers/processes.js';

function fakeRequest(peer: string, xff?: string): IncomingMessage {
  return {
    socket: { remoteAddress: peer },
    headers: xff ? { 'x-forwarded-for': xff } : {},
  } as unknown as IncomingMessage;
}

describe('IPv6 clients are counted per network', { timeout: 10_000 }, () => {
  const cases: [string, number, string][] = [
    ['2001:db8:1:2:3:4:5:6', 64, '2001:db8:1:2::/64'],
    ['2001:0DB8:0001:0002:ABCD:0000:0000:0001', 64, '2001:db8:1:2::/64'],
    ['2001:db8::1', 64, '2001:db8::/64'],
    ['2001:db8:1:2ff::1', 56, '2001:db8:1:200::/56'],
    ['2001:db8:1:2:3:4:5:6', 48, '2001:db8:1::/48'],
    ['2001:db8:1:2:3:4:5:6', 128, '2001:db8:1:2:3:4:5:6'],
    ['2001:db8:0:0:1:0:0:1', 128, '2001:db8::1:0:0:1'],
    ['fe80::1%eth0', 64, 'fe80::/64'],
    ['fe80::1%eth0', 128, 'fe80::1'],
    ['::1', 64, '::/64'],
    ['::1', 128, '::1'],
    ['::ffff:192.0.2.1', 64, '192.0.2.1'],
    ['::ffff:c000:201', 64, '192.0.2.1'],
    ['64:ff9b::192.0.2.33', 128, '64:ff9b::c000:221'],
    ['203.0.113.5', 64, '203.0.113.5'],
    ['[2001:db8:1:2::7]', 64, '2001:db8:1:2::/64'],
    ['[2001:db8:1:2::7]:443', 64, '2001:db8:1:2::/64'],
    ['[fe80::1%eth0]:443', 128, 'fe80::1'],
    ['192.0.2.1:5678', 64, '192.0.2.1'],
    ['not-an-address', 64, 'not-an-address'],
  ];
  for (const [addr, prefix, expected] of cases) {
    it(`${addr} /${prefix} -> ${expected}`, () => {
      assert.equal(clientNetwork(addr, prefix), expected);
    });
  }

  it('any two addresses with the same first 64 bits are one client; the rest is zero', () => {
    const group = fc.integer({ min: 0, max: 0xffff });
    const groups = fc.array(group, { minLength: 4, maxLength: 4 });
    fc.assert(
      fc.property(groups, groups, groups, (network, hostA, hostB) => {
        fc.pre(!(network[0] === 0 && network[1] === 0)); // keep clear of v4-mapped space
        const spell = (g: number[]) => g.map((x) => x.toString(16)).join(':');
        const a = clientNetwork(spell([...network, ...hostA]), 64);
        const b = clientNetwork(spell([...network, ...hostB]), 64);
        assert.equal(a, b);
        assert.ok(a.endsWith('/64') && isIPv6(a.slice(0, -3)), a);
        assert.equal(clientNetwork(a.slice(0, -3), 64), a, 'masking is idempotent');
      }),
      { numRuns: 500 },
    );
  });

  it('identifies the peer by its network; X-Forwarded-For keeps the full address', () => {
    const address = new ClientAddress(['127.0.0.1']);
    const req = fakeRequest('127.0.0.1', '2001:db8:1:2::7');
    assert.equal(address.ip(req), '2001:db8:1:2::/64');
    assert.equal(address.forwardedFor(req), '2001:db8:1:2::7, 127.0.0.1');
    const perAddress = new ClientAddress([], { ipv6PrefixLength: 128 });
    assert.equal(perAddress.ip(fakeRequest('2001:db8:1:2::7')), '2001:db8:1:2::7');
  });
});

describe('one quota per IPv6 /64, through a trusted proxy', { timeout: 60_000 }, () => {
  const LIMIT = 5;
  let relay: RelayProcess;
  let gw: GatewayUnderTest;

  before(async () => {
    relay = await startRelay({ nodeId: 'relay-a' });
    gw = await startGateway('iovalkey', 'standalone', [{ id: 'relay-a', url: relay.url }], {
      trustedProxies: ['127.0.0.1'],
      quotas: {
        keyPrefix: `v6${Date.now().toString(36)}`,
        tiers: { default: { write: { points: LIMIT, windowSec: 60 } } },
      },
    });
  });

  after(async () => {
    await gw?.proc.stop();
    await relay?.stop();
  });

  /**
   * A write the gateway charges (the relay then answers 404: not a 429). Not /events: an
   * event posted there is parsed before it is charged, and `{}` is no event.
   */
  async function writeAs(client: string): Promise<number> {
    const res = await request(`${gw.url}/ingest`, {
      method: 'POST',
      body: '{}',
      headers: { 'x-forwarded-for': client },
    });
    return res.status;
  }

  it('two addresses of one /64 share a quota; another /64 has its own', async () => {
    for (let i = 0; i < LIMIT; i++) assert.notEqual(await writeAs('2001:db8:aa:1::1'), 429);
    assert.equal(await writeAs('2001:db8:aa:1::2'), 429, 'a sibling address gets no fresh quota');
    assert.equal(await writeAs('2001:db8:aa:1:ffff:ffff:ffff:ffff'), 429);
    assert.notEqual(await writeAs('2001:db8:aa:2::1'), 429, 'the next /64 is another client');
  });
});
