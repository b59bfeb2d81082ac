import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ClientAddress } from '../../../src/gateway/client-address.js';
import { dispatchKey, forwardedForIn, slotFor } from '../../../src/gateway/sticky-dispatch.js';

const keys = Array.from({ length: 2000 }, (_, i) => `10.${(i >> 8) & 255}.${i & 255}.7`);

describe('which worker an address goes to', { timeout: 10_000 }, () => {
  it('is the same slot every time, none when no slot is live', () => {
    for (const key of keys.slice(0, 50)) assert.equal(slotFor(key, [0, 1]), slotFor(key, [1, 0]));
    assert.equal(slotFor('10.0.0.1', []), undefined);
  });

  it('spreads addresses evenly over the slots', () => {
    for (const slots of [
      [0, 1],
      [0, 1, 2, 3],
    ]) {
      const counts = slots.map((s) => keys.filter((k) => slotFor(k, slots) === s).length);
      const even = keys.length / slots.length;
      for (const n of counts) assert.ok(Math.abs(n - even) < even * 0.15, `${counts.join(' ')}`);
    }
  });

  it('moves only the addresses of a slot that goes, and brings them back when it returns', () => {
    const all = [0, 1, 2];
    for (const key of keys) {
      const before = slotFor(key, all)!;
      const without1 = slotFor(key, [0, 2]);
      if (before !== 1) assert.equal(without1, before, `${key} stays on ${before}`);
      else assert.notEqual(without1, 1);
    }
  });
});

describe("a trusted proxy's first request", { timeout: 10_000 }, () => {
  it('names its X-Forwarded-For once the header section is whole, repeats joined', () => {
    const head = (lines: string[], end = '\r\n\r\n') =>
      Buffer.from(`GET / HTTP/1.1\r\n${lines.join('\r\n')}${end}`, 'latin1');
    assert.equal(forwardedForIn(head(['Host: x', 'X-Forwarded-For: 1.2.3.4'])), '1.2.3.4');
    assert.equal(
      forwardedForIn(head(['x-forwarded-for: 1.2.3.4', 'Host: x', 'X-FORWARDED-FOR:  5.6.7.8'])),
      '1.2.3.4, 5.6.7.8',
    );
    assert.equal(forwardedForIn(head(['Host: x'])), undefined);
    assert.equal(forwardedForIn(head(['X-Forwarded-For: 1.2.3.4'], '\r\n')), undefined);
  });
});

describe('the key an address is hashed by', { timeout: 10_000 }, () => {
  it('believes a forwarded client only from a trusted peer, and counts IPv6 by network', () => {
    const address = new ClientAddress(['127.0.0.1'], { ipv6PrefixLength: 64 });
    assert.equal(dispatchKey(address, '127.0.0.1', '198.51.100.7'), '198.51.100.7');
    assert.equal(dispatchKey(address, '127.0.0.2', '198.51.100.7'), '127.0.0.2');
    assert.equal(dispatchKey(address, '::ffff:127.0.0.2'), '127.0.0.2');
    assert.equal(dispatchKey(address, '2001:db8:1:2::5'), dispatchKey(address, '2001:db8:1:2::9'));
  });
});
