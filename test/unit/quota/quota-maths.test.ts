import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  IDLE_GAPS,
  MAX_LEASE,
  effectivePoints,
  idleAfter,
  insuredPoints,
  leaseDivisor,
  leaseForRate,
  nextLeaseSize,
  underAdmissionBound,
  quantiseMultiplier,
  secondsUntil,
} from '../../../src/quota/limits.js';
import { nostrRejection, quotaProblem, rateLimitHeaders } from '../../../src/quota/responses.js';
import type { QuotaDecision } from '../../../src/quota/decider.js';

describe('effective limits', { timeout: 30_000 }, () => {
  it('quantises the multiplier down to the step, within [0, 1]', () => {
    assert.equal(quantiseMultiplier(0.5, 0.05), 0.5);
    assert.equal(quantiseMultiplier(0.549, 0.05), 0.5);
    assert.equal(quantiseMultiplier(0.55, 0.05), 0.55);
    assert.equal(quantiseMultiplier(1.7, 0.05), 1);
    assert.equal(quantiseMultiplier(-1, 0.05), 0);
    assert.equal(quantiseMultiplier(Number.NaN, 0.05), 0);
    assert.equal(quantiseMultiplier(0.02, 0.05), 0.05, 'a positive multiplier keeps one step');
  });

  it('scales the base quota, never above base x m, and keeps one point while m > 0', () => {
    assert.equal(effectivePoints(10, 0.5, 0.05), 5);
    assert.equal(effectivePoints(600, 0.33, 0.05), 180);
    assert.equal(effectivePoints(100, 0.01, 0.05), 5, 'below one step still gets one step');
    assert.equal(effectivePoints(10, 0.05, 0.05), 1, 'rounding alone never shuts a client out');
    assert.equal(effectivePoints(10, 0, 0.05), 0);
    assert.equal(effectivePoints(0, 1, 0.05), 0);
  });

  it('gives each of N gateways its share of the quota when Valkey is down', () => {
    assert.equal(insuredPoints(10, 1), 10);
    assert.equal(insuredPoints(10, 3), 4);
    assert.equal(insuredPoints(1, 5), 1);
    assert.equal(insuredPoints(0, 2), 0);
  });

  it('rounds time to retry up to whole seconds', () => {
    assert.equal(secondsUntil(1), 1);
    assert.equal(secondsUntil(1000), 1);
    assert.equal(secondsUntil(1001), 2);
    assert.equal(secondsUntil(0), 0);
  });
});

const limited: QuotaDecision = {
  outcome: 'limited',
  admitted: false,
  policy: 'writes',
  limit: 5,
  windowSec: 10,
  remaining: 0,
  resetSec: 7,
  multiplier: 0.5,
  fromMemory: false,
};

describe('lease sizes', { timeout: 30_000 }, () => {
  it('lets a lease granted whole be followed by one as large as the rate asks, and shrinks one that was clipped', () => {
    assert.equal(nextLeaseSize(1, 1), MAX_LEASE);
    assert.equal(nextLeaseSize(MAX_LEASE, MAX_LEASE), MAX_LEASE);
    assert.equal(nextLeaseSize(64, 5), 5, 'clipped near the limit: ask for what was granted');
    assert.equal(nextLeaseSize(8, 0), 1, 'refused: start again from one point');
  });

  it("sizes a lease to what the key writes in its window's time left at its recent rate", () => {
    assert.equal(leaseForRate(8, 400, 5000), 100, '20 writes/s x 5 s left');
    assert.equal(leaseForRate(1, 3000, 60_000), 20, 'one write every 3 s x 60 s left');
    assert.equal(leaseForRate(4, 12_000, 60_000), 20, 'four writes in 12 s: every 3 s');
    assert.equal(leaseForRate(1, 20_000, 60_000), 3, 'three writes a minute');
    assert.equal(leaseForRate(1, 3000, 1000), 1, 'the window ends before its next write');
    assert.equal(leaseForRate(0, 100, 60_000), 1, 'nothing granted last time: one point');
    assert.equal(leaseForRate(1, 0, 5000), 5000, 'no time passed: no cap from the rate');
  });

  it("keeps a key's lease for three of its gaps between writes, within idleMs and its window", () => {
    assert.equal(IDLE_GAPS, 3);
    assert.equal(idleAfter(1, 20_000, 10_000, 60_000), 60_000, 'a write every 20 s: 60 s');
    assert.equal(idleAfter(4, 20_000, 10_000, 60_000), 15_000, 'every 5 s: 15 s');
    assert.equal(idleAfter(10, 1000, 10_000, 60_000), 10_000, 'fast: idleMs');
    assert.equal(idleAfter(1, 50_000, 10_000, 60_000), 60_000, 'never past the window');
    assert.equal(idleAfter(0, 50_000, 10_000, 60_000), 10_000, 'no known rate: idleMs');
  });

  it('bounds what leases can strand per window by holders, the cap and the limit', () => {
    assert.equal(leaseDivisor(3), 6);
    assert.equal(underAdmissionBound(40, 3), 3 * 6, 'three holders, each at most 40 / 6');
    assert.equal(underAdmissionBound(100_000, 2), 2 * MAX_LEASE);
    assert.equal(underAdmissionBound(1, 4), 1, 'never more than the limit itself');
  });
});

describe('rate-limit responses', { timeout: 30_000 }, () => {
  it('emits the structured-field headers of the IETF draft, with Retry-After on rejection', () => {
    assert.deepEqual(rateLimitHeaders(limited), {
      'ratelimit-policy': '"writes";q=5;w=10',
      ratelimit: '"writes";r=0;t=7',
      'retry-after': '7',
    });
    const allowed = rateLimitHeaders({
      ...limited,
      outcome: 'allowed',
      admitted: true,
      remaining: 3,
    });
    assert.equal(allowed.ratelimit, '"writes";r=3;t=7');
    assert.equal(allowed['retry-after'], undefined);
  });

  it('describes the violated policy in a problem body', () => {
    const body = quotaProblem(limited);
    assert.equal(body.status, 429);
    assert.equal(body.type, 'https://iana.org/assignments/http-problem-types#quota-exceeded');
    assert.deepEqual(body['violated-policies'], ['writes']);
    assert.equal(body.retryAfter, 7);
    assert.match(body.detail, /5 per 10 s/);
  });

  it('uses the rate-limited: prefix for quota rejections and error: for store failures', () => {
    assert.match(nostrRejection(limited), /^rate-limited: .*retry in 7s/);
    assert.match(nostrRejection({ ...limited, outcome: 'error' }), /^error: /);
  });
});
