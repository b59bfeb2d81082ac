/**
 * An accepted event's id is claimed in Valkey for its author's write window: a listed author's
 * tier decides it, not the default tier (a replay inside the window must stay a duplicate).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { generateSecretKey, getPublicKey } from 'nostr-tools/pure';
import { writeServices } from '../../../src/gateway/write-services.js';
import type { KeyValue } from '../../../src/store/index.js';
import { admissionUnderTest } from '../../helpers/fake-admission-context.js';
import { signedEvent } from '../../helpers/nostr-events.js';

const NOW_MS = 1_800_000_000_000;

function claimedFor(listed: boolean): Promise<number[]> {
  const sk = generateSecretKey();
  const pubkey = getPublicKey(sk);
  const { ctx } = admissionUnderTest(
    {
      quotas: {
        tiers: {
          default: { write: { points: 5, windowSec: 60 } },
          patron: { write: { points: 50, windowSec: 3600 } },
        },
      },
      identity: { order: ['pubkey', 'ip'] },
    },
    ['allowed'],
  );
  ctx.policy.setPubkeyTiers(new Map(listed ? [[pubkey, 'patron']] : []));
  const claims: number[] = [];
  const kv = {
    claim: (_key: string, _value: string, pxMs: number) => {
      claims.push(pxMs);
      return Promise.resolve(true);
    },
  } as unknown as KeyValue;
  const services = writeServices({ ...ctx, store: { ...ctx.store, kv } }, () => NOW_MS);
  const event = signedEvent(1, 'claimed for its window', sk);
  event.created_at = Math.floor(NOW_MS / 1000);
  return services.settle.claim(event, true, ctx.policy).then(() => claims);
}

describe("an accepted event's id is claimed for its author's window", { timeout: 10_000 }, () => {
  it("a listed author's tier window, else the default's", async () => {
    assert.deepEqual(await claimedFor(true), [3_600_000]);
    assert.deepEqual(await claimedFor(false), [60_000]);
  });
});
