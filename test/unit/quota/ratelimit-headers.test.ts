/** The rate-limit header fields a decision becomes (over sockets: test/integration/ratelimit-headers.test.ts). */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { QuotaDecision } from '../../../src/quota/decider.js';
import { rateLimitHeaders } from '../../../src/quota/responses.js';

describe('rate-limit header fields', { timeout: 10_000 }, () => {
  const decision: QuotaDecision = {
    outcome: 'limited',
    admitted: false,
    policy: 'writes',
    limit: 5,
    windowSec: 60,
    remaining: 0,
    resetSec: 0,
    multiplier: 1,
    fromMemory: false,
  };

  it('Retry-After is never earlier than t, and at least one second', () => {
    for (const resetSec of [0, 1, 7, 60]) {
      const h = rateLimitHeaders({ ...decision, resetSec });
      assert.ok(Number(h['retry-after']) >= Math.max(1, resetSec), `t=${resetSec}`);
    }
  });

  it('sends no X-RateLimit-* fields unless asked', () => {
    const fields = Object.keys(rateLimitHeaders(decision));
    assert.deepEqual(
      fields.filter((f) => f.startsWith('x-')),
      [],
    );
  });
});
