/**
 * The retry time of a refusal by the sender's quota covers its author's quota when this process
 * knows it short (quotaRefusal's authorShort): here from what the author's last charge showed
 * (Headroom), the decider knowing no block (ClockedDecider), in simulated time. The same
 * scenario over raw sockets, where the in-memory block tells: test/hostile/retry-covers-every-quota.
 *
 * Mutation tried: authorShort without its Headroom branch: the client is told the address's
 * time, and refused by its author then (fails).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { finalizeEvent, generateSecretKey } from 'nostr-tools/pure';
import type { Event } from 'nostr-tools/pure';
import type { ConnectionFacts } from '../../../src/gateway/admission.js';
import { retryInSec } from '../../../src/nostr/refusals.js';
import { ClockedDecider } from '../../helpers/clocked-decider.js';
import { admissionUnderTest } from '../../helpers/fake-admission-context.js';

const START_MS = 1_800_000_000_000;
const WINDOW_SEC = 6;

describe("a sender's refusal covers its author's known quota", { timeout: 30_000 }, () => {
  it('a client waiting exactly the time given is accepted', async () => {
    let now = START_MS;
    const clock = () => now;
    const { admission } = admissionUnderTest({ identity: { order: ['pubkey', 'ip'] } }, [], {
      decider: new ClockedDecider(2, WINDOW_SEC, clock),
      now: clock,
    });
    const conn = (ip: string): ConnectionFacts => ({
      ip,
      nodeId: 'relay-a',
      session: admission.newSession(),
    });
    const [sender, other] = [conn('203.0.113.2'), conn('203.0.113.3')];
    let n = 0;
    const event = (sk = generateSecretKey()): Event =>
      finalizeEvent({ kind: 1, created_at: 1_800_000_000, tags: [], content: `${n++}` }, sk);
    const send = async (c: ConnectionFacts, e: Event) => {
      const verdict = await admission.frame(c, Buffer.from(JSON.stringify(['EVENT', e])), false);
      return verdict.forward ? undefined : String(verdict.reply![3]);
    };
    // The sender's address spends its quota; half a window later another address spends the
    // author's, whose window so ends later.
    for (let i = 0; i < 2; i++) assert.equal(await send(sender, event()), undefined);
    now += (WINDOW_SEC / 2) * 1000;
    const author = generateSecretKey();
    for (let i = 0; i < 2; i++) assert.equal(await send(other, event(author)), undefined);
    const write = event(author);
    const refusal = await send(sender, write);
    const sec = retryInSec(refusal ?? '');
    assert.equal(sec, WINDOW_SEC, `the author's window, not the address's: ${refusal}`);
    now += sec * 1000;
    assert.equal(await send(sender, write), undefined, 'accepted at the time given');
  });
});
