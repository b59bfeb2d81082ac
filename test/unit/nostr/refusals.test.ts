/**
 * The inventory of refusals (nostr/refusals.ts): each one either names when to retry
 * (`retry in Ns`) or is one no retry of the same message passes, and says what would pass; and
 * every NIP-01 refusal text in the gateway's source is worded there (or, with a quota
 * decision's numbers, in quota/responses.ts), so a new refusal cannot skip the table.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { finalizeEvent, generateSecretKey } from 'nostr-tools/pure';
import type { Event } from 'nostr-tools/pure';
import type { IdentitySource } from '../../../src/config/schema.js';
import type { Admission, ConnectionFacts } from '../../../src/gateway/admission.js';
import { PROJECT_ROOT } from '../../../src/harness/paths.js';
import {
  EARLY_RETRY_CLOSE,
  REFUSALS,
  closingNotice,
  frameRateRefusal,
  retryInSec,
  retrySec,
} from '../../../src/nostr/refusals.js';
import type { QuotaDecision } from '../../../src/quota/decider.js';
import { nostrRejection, quotaProblem } from '../../../src/quota/responses.js';
import { EarlyRetries, EARLY_GRACE_MS } from '../../../src/write/early-retries.js';
import { admissionUnderTest } from '../../helpers/fake-admission-context.js';

const signed = (kind: number) =>
  finalizeEvent({ kind, created_at: 1_800_000_000, tags: [], content: 'x' }, generateSecretKey());
const NOTE = signed(1);
const SIGNING = signed(24133);

const NIP01 = /^(rate-limited|auth-required|pow|restricted|invalid|error|blocked|duplicate|mute):/;

/** Source files of the gateway (the reference relay, the benchmark and the CLI speak for themselves). */
function gatewaySources(dir = path.join(PROJECT_ROOT, 'src')): string[] {
  return readdirSync(dir).flatMap((name) => {
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) {
      return ['relay', 'bench', 'cli'].includes(name) ? [] : gatewaySources(full);
    }
    return full.endsWith('.ts') ? [full] : [];
  });
}

/** Where refusals are worded. */
const WORDED_IN = ['src/nostr/refusals.ts', 'src/quota/responses.ts'];
/** NIP-01 texts that are no refusal: an OK true for a replay. */
const NOT_REFUSALS = ['duplicate: already have this event'];

const decision = (over: Partial<QuotaDecision>): QuotaDecision => ({
  outcome: 'limited',
  admitted: false,
  policy: 'writes',
  limit: 60,
  windowSec: 60,
  remaining: 0,
  resetSec: 12,
  multiplier: 1,
  fromMemory: false,
  ...over,
});

describe('refusal inventory', { timeout: 30_000 }, () => {
  it('each refusal names its retry time, or what would pass instead', () => {
    const names = new Set<string>();
    for (const r of REFUSALS) {
      assert.ok(!names.has(r.name), `${r.name} twice`);
      names.add(r.name);
      const sec = retryInSec(r.example);
      if (r.remedy.retry === 'timed') {
        assert.ok(sec !== undefined && sec >= 1, `${r.name}: no retry time in "${r.example}"`);
      } else {
        assert.equal(sec, undefined, `${r.name} says no retry passes, yet names a time`);
        assert.ok(r.remedy.passes.length > 0, `${r.name}: says nothing of what would pass`);
      }
      if (!r.sent.startsWith('HTTP') || NIP01.test(r.example)) {
        assert.match(r.example, NIP01, `${r.name}: no NIP-01 prefix`);
      }
    }
  });

  it('every NIP-01 refusal text in the gateway is worded in the refusal modules', () => {
    const literal =
      /(['"`])((?:rate-limited|auth-required|pow|restricted|invalid|error|blocked|duplicate|mute): [^'"`]*)/g;
    const strays: string[] = [];
    for (const file of gatewaySources()) {
      const rel = path.relative(PROJECT_ROOT, file);
      if (WORDED_IN.includes(rel)) continue;
      // Code only: a comment may quote what another relay answers.
      const code = readFileSync(file, 'utf8')
        .split('\n')
        .filter((line) => !/^\s*(\/\/|\*|\/\*)/.test(line))
        .join('\n');
      for (const m of code.matchAll(literal)) {
        if (!NOT_REFUSALS.includes(m[2]!)) strays.push(`${rel}: ${m[2]}`);
      }
    }
    assert.deepEqual(strays, [], 'refusal texts outside nostr/refusals.ts: add them there');
  });

  it('quota refusals carry the seconds to the end of the window, over Nostr and HTTP', () => {
    for (const d of [
      decision({}),
      decision({ multiplier: 0.5 }),
      decision({ multiplier: 0 }),
      decision({ policy: 'node-budget', multiplier: 0.5 }),
    ]) {
      assert.equal(retryInSec(nostrRejection(d)), 12, nostrRejection(d));
      assert.equal(retryInSec(quotaProblem(d).detail), 12, quotaProblem(d).detail);
    }
    assert.match(nostrRejection(decision({ outcome: 'error' })), /^error: .*retry in 1s/);
    const withAuth = nostrRejection(decision({}), 'AUTH (NIP-42) as a listed pubkey');
    assert.match(withAuth, /retry in 12s, or AUTH \(NIP-42\) as a listed pubkey$/);
    assert.equal(retryInSec(nostrRejection(decision({ resetSec: 0 }))), 1, 'never 0 s');
  });

  it('rounds a wait up to whole seconds, at least 1', () => {
    assert.equal(retrySec(1), 1);
    assert.equal(retrySec(1000), 1);
    assert.equal(retrySec(1001), 2);
    assert.equal(retrySec(0), 1);
    assert.equal(retryInSec(frameRateRefusal(1)), 1);
    assert.match(closingNotice(EARLY_RETRY_CLOSE), /^rate-limited: .*closing the connection$/);
    assert.match(closingNotice('too many events that do not verify'), /^restricted: /);
  });
});

describe('early retries', { timeout: 10_000 }, () => {
  it('holds the same write from the same address until its time, and counts it', () => {
    let now = 1_000_000;
    const book = new EarlyRetries(100, () => now);
    book.refused('203.0.113.1', 'a'.repeat(64), 5, decision({ resetSec: 5 }));
    now += 1000;
    const early = book.early('203.0.113.1', 'a'.repeat(64), 60_000);
    assert.deepEqual({ waitMs: early?.waitMs, count: early?.count }, { waitMs: 4000, count: 1 });
    assert.equal(book.early('203.0.113.1', 'b'.repeat(64), 60_000), undefined, 'another write');
    assert.equal(book.early('203.0.113.2', 'a'.repeat(64), 60_000), undefined, 'another address');
    assert.equal(early?.repeated, false, 'a first early copy (a resend on reconnect)');
    const again = book.early('203.0.113.1', 'a'.repeat(64), 60_000);
    assert.deepEqual([again?.count, again?.repeated], [2, true], 'a second: a bouncer');
    // An honest client that waits the time it was given (less the grace) is on time.
    now += 4000 - EARLY_GRACE_MS;
    assert.equal(book.early('203.0.113.1', 'a'.repeat(64), 60_000), undefined);
    assert.equal(book.size, 0, 'forgotten once on time');
  });

  it('keeps the later of two retry times', () => {
    let now = 0;
    const book = new EarlyRetries(100, () => now);
    book.refused('ip', 'x', 10, decision({}));
    book.refused('ip', 'x', 2, decision({}));
    now = 5000;
    assert.equal(book.early('ip', 'x', 60_000)?.waitMs, 5000);
  });

  it('is bounded: the least recently refused write is forgotten', () => {
    const book = new EarlyRetries(3, () => 0);
    for (const id of ['a', 'b', 'c', 'd']) book.refused('ip', id, 10, decision({}));
    assert.equal(book.size, 3);
    assert.equal(book.early('ip', 'a', 60_000), undefined);
  });
});

describe('what a refusal offers instead, and exempt kinds', { timeout: 30_000 }, () => {
  const conn = (admission: Admission): ConnectionFacts => ({
    ip: '198.51.100.9',
    nodeId: 'relay-a',
    session: admission.newSession(),
  });
  const frame = (e: Event) => Buffer.from(JSON.stringify(['EVENT', e]));

  it('names AUTH where AUTH as a listed pubkey would lift the address', async () => {
    const settings = (tiers: Record<string, string>) => ({
      identity: { order: ['auth', 'ip'] as IdentitySource[], pubkeyTiers: tiers },
      nostr: { publicUrl: 'ws://127.0.0.1:1' },
      quotas: {
        tiers: {
          default: { write: { points: 1, windowSec: 60 } },
          paid: { write: { points: 100, windowSec: 60 }, chargeAddress: false },
        },
      },
    });
    const lifting = admissionUnderTest(settings({ paid: 'paid.txt' }), ['limited']);
    const lifted = await lifting.admission.frame(conn(lifting.admission), frame(NOTE), false);
    assert.match(String(lifted.reply?.[3]), /retry in 3s, or AUTH \(NIP-42\) as a listed pubkey$/);
    const plain = admissionUnderTest(settings({}), ['limited']);
    const refused = await plain.admission.frame(conn(plain.admission), frame(NOTE), false);
    assert.match(String(refused.reply?.[3]), /retry in 3s$/, 'no tier lifts: AUTH is not offered');
  });

  it('writes kind 24133 free of every quota by default; exemptKinds [] charges it', async () => {
    const free = admissionUnderTest({ identity: { order: ['pubkey', 'ip'] } }, ['limited']);
    const passed = await free.admission.frame(conn(free.admission), frame(SIGNING), false);
    assert.equal(passed.forward, true);
    assert.equal(free.decider.charges.length, 0, 'nothing asked of the quota');
    const charged = admissionUnderTest({ nostr: { exemptKinds: [] } }, ['limited']);
    const refused = await charged.admission.frame(conn(charged.admission), frame(SIGNING), false);
    assert.equal(refused.forward, false);
    assert.match(String(refused.reply?.[3]), /^rate-limited: write quota/);
  });
});

describe('a write dearer than its whole quota', { timeout: 30_000 }, () => {
  it('says no retry passes rather than a time', async () => {
    const { admission } = admissionUnderTest(
      {
        nostr: { costs: { kinds: { '1984': 20 } } },
        quotas: { tiers: { default: { write: { points: 10, windowSec: 60 } } } },
      },
      ['limited'],
    );
    const session = admission.newSession();
    const report = signed(1984);
    const frame = Buffer.from(JSON.stringify(['EVENT', report]));
    const verdict = await admission.frame(
      { ip: '198.51.100.7', nodeId: 'relay-a', session },
      frame,
      false,
    );
    assert.equal(retryInSec(String(verdict.reply?.[3])), undefined, String(verdict.reply?.[3]));
  });
});
