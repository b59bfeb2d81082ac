/**
 * Invariant: a refusal names a retry time no earlier than when the same write can pass, or says
 * why no retry passes. Generated sequences of writes from a few clients (new events, the same
 * refused event again at once as a bouncer does, NIP-46 signing events, a blocked kind), in
 * simulated time, through the admission step with a fixed-window quota. After each refusal
 * that names `retry in Ns` the client sends nothing new, and sends the same write again at that
 * time: it must not be refused for the same reason again (another check may refuse it, naming
 * its own time). Exempt kinds are never refused by a quota.
 *
 * Mutation tried: retryAfterSec (quota/responses.ts) returning resetSec - 1: the retry lands
 * inside the window and is refused by the quota again (fails). So does the frame-rate refusal
 * saying 0 s.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { finalizeEvent, generateSecretKey } from 'nostr-tools/pure';
import type { Event } from 'nostr-tools/pure';
import type { ConnectionFacts } from '../../src/gateway/admission.js';
import { REFUSALS, retryInSec } from '../../src/nostr/refusals.js';
import { ClockedDecider } from '../helpers/clocked-decider.js';
import { admissionUnderTest } from '../helpers/fake-admission-context.js';
import { propertyParams } from '../helpers/property-params.js';

const CLIENTS = 3;
const PER_CLIENT = 24;
const START_MS = 1_800_000_000_000;

/** Kinds each client writes from: its own keys, events made once (signing is slow). */
function pool(kind: number, c: number): Event[] {
  const sk = generateSecretKey();
  return Array.from({ length: PER_CLIENT }, (_, i) =>
    finalizeEvent({ kind, created_at: 1_800_000_000, tags: [], content: `${c}-${i}` }, sk),
  );
}
const POOLS = Array.from({ length: CLIENTS }, (_, c) => ({
  note: pool(1, c),
  signing: pool(24133, c),
  blocked: pool(4, c),
}));

type What = 'new' | 'again' | 'signing' | 'blocked';
const step = fc.record({
  client: fc.nat({ max: CLIENTS - 1 }),
  what: fc.constantFrom<What>('new', 'new', 'again', 'again', 'signing', 'blocked'),
  advanceMs: fc.oneof(fc.constant(0), fc.nat({ max: 1500 })),
});

/** Which check refused, from its words. */
function reasonOf(message: string): string {
  if (message.includes('too many messages')) return 'frame-rate';
  if (message.includes('sent again before')) return 'early';
  if (message.includes('write quota')) return 'quota';
  return message.split(':')[0]!;
}

/** A refusal with no retry time must be one the inventory lists as no retry passing. */
function namesWhyNoRetry(message: string): boolean {
  const prefix = message.split(':')[0];
  return REFUSALS.some((r) => r.remedy.retry === 'never' && r.example.split(':')[0] === prefix);
}

interface Probe {
  event: Event;
  dueMs: number;
  reason: string;
}

describe('retry times a retry meets', { timeout: 240_000 }, () => {
  it('the same write at its retry time is never refused for the same reason again', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(step, { minLength: 5, maxLength: 60 }),
        fc.integer({ min: 1, max: 4 }),
        fc.integer({ min: 1, max: 5 }),
        fc.integer({ min: 2, max: 6 }),
        async (steps, limit, windowSec, perSec) => {
          let now = START_MS;
          const clock = () => now;
          const decider = new ClockedDecider(limit, windowSec, clock);
          const { admission } = admissionUnderTest(
            {
              identity: { order: ['ip'] },
              nostr: { blockedKinds: [4] },
              limits: {
                framesPerSecPerAddress: perSec,
                earlyRetries: { holdMs: 2000, max: 10_000, windowSec: 60 },
              },
            },
            [],
            { decider, now: clock },
          );
          const conns: ConnectionFacts[] = Array.from({ length: CLIENTS }, (_, i) => ({
            ip: `203.0.113.${i + 1}`,
            nodeId: 'relay-a',
            session: admission.newSession(),
          }));
          const used = Array.from({ length: CLIENTS }, () => ({ note: 0, signing: 0, blocked: 0 }));
          const lastRefused: (Event | undefined)[] = [];
          const probes: (Probe | undefined)[] = [];

          /** Send `event` from client `c`; check and schedule what its answer says. */
          const send = async (c: number, event: Event, probe?: Probe) => {
            const frame = Buffer.from(JSON.stringify(['EVENT', event]));
            const verdict = await admission.frame(conns[c]!, frame, false);
            if (verdict.forward) {
              // Passed (a bouncer's copy on time, within the grace): nothing more to retry.
              if (probes[c]?.event.id === event.id) probes[c] = undefined;
              return;
            }
            const reply = verdict.reply!;
            if (reply[0] !== 'OK' || reply[2] !== false) return;
            const message = String(reply[3]);
            const reason = reasonOf(message);
            if (probe) {
              assert.notEqual(
                reason,
                probe.reason,
                `sent again at its retry time, refused for the same reason: ${message}`,
              );
            }
            if (event.kind === 24133) {
              assert.notEqual(reason, 'quota', `an exempt kind was refused by quota: ${message}`);
            }
            const sec = retryInSec(message);
            if (sec === undefined) {
              assert.ok(namesWhyNoRetry(message), `no retry time, and no reason: ${message}`);
              return;
            }
            lastRefused[c] = event;
            const dueMs = now + sec * 1000;
            if (!probes[c] || probes[c].dueMs <= dueMs) probes[c] = { event, dueMs, reason };
          };

          /** Move the clock to `to`, sending each obedient retry that falls due on the way. */
          const advance = async (to: number) => {
            for (;;) {
              const due = probes
                .map((p, c) => ({ p, c }))
                .filter((x): x is { p: Probe; c: number } => !!x.p && x.p.dueMs <= to)
                .sort((a, b) => a.p.dueMs - b.p.dueMs)[0];
              if (!due) break;
              now = Math.max(now, due.p.dueMs);
              probes[due.c] = undefined;
              await send(due.c, due.p.event, due.p);
            }
            now = Math.max(now, to);
          };

          for (const s of steps) {
            await advance(now + s.advanceMs);
            const c = s.client;
            const waiting = probes[c] !== undefined;
            const again = lastRefused[c];
            // A bouncer sends the refused write again at once; an obedient client, nothing new
            // while it waits (its retry is sent by `advance`).
            if (s.what === 'again' && again && waiting && probes[c]!.reason !== 'frame-rate') {
              await send(c, again);
              continue;
            }
            if (waiting) continue;
            const kind = s.what === 'again' ? 'note' : s.what === 'new' ? 'note' : s.what;
            const next = used[c]![kind]++;
            const event = POOLS[c]![kind][next % PER_CLIENT]!;
            if (next >= PER_CLIENT && kind === 'note') continue;
            await send(c, event);
          }
          await advance(now + 3_600_000);
        },
      ),
      propertyParams(300),
    );
  });
});
