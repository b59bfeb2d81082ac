/** The gateway's limits merged into a relay's NIP-11 `limitation` (through the gateway: test/integration/relay-info.test.ts). */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { GatewayConfigSchema } from '../../../src/config/schema.js';
import {
  NODE_BUDGET_KEY,
  WRITE_QUOTA_KEY,
  mergeRelayInfo,
} from '../../../src/nostr/relay-info-document.js';

describe('the merged limitation', { timeout: 10_000 }, () => {
  const nostr = GatewayConfigSchema.shape.nostr.parse({});

  it('takes the stricter of the two wherever both set a bound', () => {
    const relayDoc = { limitation: { max_message_length: 4096, max_subscriptions: 50 } };
    const doc = mergeRelayInfo(relayDoc, { maxFrameBytes: 131072, nostr });
    assert.deepEqual(doc.limitation, { max_message_length: 4096, max_subscriptions: 50 });
    assert.equal(doc[WRITE_QUOTA_KEY], undefined, 'no quota with quotas off');
  });

  it('adds min_pow_difficulty, auth_required / restricted_writes and max_subscriptions when configured', () => {
    const policy = {
      ...nostr,
      pow: { ...nostr.pow, minDifficulty: 20 },
      authRequiredForWrites: true,
      maxSubscriptions: 10,
    };
    const doc = mergeRelayInfo(
      { limitation: { min_pow_difficulty: 8, max_subscriptions: 50, auth_required: false } },
      {
        maxFrameBytes: 65536,
        nostr: policy,
        writeQuota: { points: 30, windowSec: 60, basePoints: 60, multiplier: 0.5 },
      },
    );
    assert.deepEqual(doc.limitation, {
      min_pow_difficulty: 20,
      max_subscriptions: 10,
      auth_required: true,
      restricted_writes: true,
      max_message_length: 65536,
    });
    assert.deepEqual(doc[WRITE_QUOTA_KEY], {
      points: 30,
      window_sec: 60,
      base_points: 60,
      multiplier: 0.5,
    });
    assert.equal(doc[NODE_BUDGET_KEY], undefined, 'no budget configured');
  });

  it('survives a relay document without a usable limitation', () => {
    for (const limitation of [undefined, 'none', [1, 2], { max_message_length: -1 }]) {
      const doc = mergeRelayInfo({ limitation }, { maxFrameBytes: 1000, nostr });
      assert.equal((doc.limitation as { max_message_length: number }).max_message_length, 1000);
    }
  });
});
