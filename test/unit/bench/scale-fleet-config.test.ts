/** The scaled-down run's pure parts: client addresses, gateway hosts, slots, metric sums. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  HOT_ADDRESS,
  gatewayHost,
  identityAddress,
  slotOfAddress,
} from '../../../src/bench/scale/fleet-config.js';
import { metricSum } from '../../../src/bench/scale/fleet-run.js';
import { keySlot } from '../../../src/bench/scale/slots.js';
import { makeIdentity } from '../../../src/quota/policy.js';
import { DEFAULT_KEY_SALT } from '../../../src/store/keys.js';

describe('scale-fleet configuration', { timeout: 30_000 }, () => {
  it('gives a million identities a million distinct addresses, none the hot one', () => {
    const seen = new Set<string>();
    for (let id = 0; id < 1_000_000; id += 997) seen.add(identityAddress(id));
    assert.equal(seen.size, Math.ceil(1_000_000 / 997));
    assert.equal(identityAddress(0), '10.0.0.0');
    assert.equal(identityAddress(65_793), '10.1.1.1');
    assert.ok(!seen.has(HOT_ADDRESS));
    assert.throws(() => identityAddress(1 << 24), RangeError);
    assert.throws(() => identityAddress(-1), RangeError);
  });

  it("puts gateways on their own loopback addresses, never the load's 127.0.0.1", () => {
    assert.equal(gatewayHost(0), '127.0.0.2');
    assert.equal(gatewayHost(11), '127.0.0.13');
    assert.throws(() => gatewayHost(251), RangeError);
  });

  it('finds the slot of an address as the gateway keys it (ip:<address>, salted)', () => {
    const key = makeIdentity('ip', HOT_ADDRESS, 'default', DEFAULT_KEY_SALT).key;
    assert.equal(slotOfAddress(HOT_ADDRESS), keySlot(key));
    assert.notEqual(slotOfAddress(HOT_ADDRESS), keySlot(`{${HOT_ADDRESS}}`));
  });

  it('sums a counter over the samples whose labels match', () => {
    const text = [
      '# HELP sluice_decisions_total x',
      'sluice_decisions_total{outcome="insured",class="write",node="a"} 3',
      'sluice_decisions_total{outcome="allowed",class="write",node="a"} 40',
      'sluice_decisions_total{outcome="insured",class="read",node="b"} 2',
      'sluice_decisions_totalx{outcome="insured"} 100',
    ].join('\n');
    assert.equal(metricSum(text, 'sluice_decisions_total', 'outcome="insured"'), 5);
    assert.equal(metricSum(text, 'sluice_decisions_total', 'outcome="error"'), 0);
  });
});
