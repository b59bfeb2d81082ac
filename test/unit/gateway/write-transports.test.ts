/**
 * The same writes over WebSocket and POSTed over HTTP charge every identity the same: one
 * generated sequence (genuine, forged, replayed, over-limit, blocked kinds; a lifting tier;
 * pressure with a node budget; relays that store, refuse, answer `duplicate:` or `invalid:`,
 * close or stall) is driven through two gateways in process, each over the real decider on a
 * fake Valkey, and every counter must end equal. Where the transports may differ is listed in
 * src/write/transport-differences.ts, and only those steps are held apart here.
 */
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import fc from 'fast-check';
import { generateSecretKey, getPublicKey } from 'nostr-tools/pure';
import type { Event } from 'nostr-tools/pure';
import { GatewayConfigSchema } from '../../../src/config/schema.js';
import { Admission } from '../../../src/gateway/admission.js';
import type { ConnectionFacts } from '../../../src/gateway/admission.js';
import { relayVerdictOf } from '../../../src/gateway/http-forward.js';
import { initSignatureVerifier, verifySignature } from '../../../src/nostr/frames.js';
import { MultiplierBoard } from '../../../src/pressure/follower/board.js';
import { QuotaDecider } from '../../../src/quota/decider.js';
import { Policy, makeIdentity, pubkeyIdentity } from '../../../src/quota/policy.js';
import type { Identity } from '../../../src/quota/policy.js';
import type { WriteTicket } from '../../../src/write/ticket.js';
import { TRANSPORT_DIFFERENCES } from '../../../src/write/transport-differences.js';
import type { TransportDifference } from '../../../src/write/transport-differences.js';
import { MemoryKv, admissionServices } from '../../helpers/fake-admission-context.js';
import { FakeValkey, manualClock } from '../../helpers/fake-valkey.js';
import { signedEvent } from '../../helpers/nostr-events.js';
import { propertyParams } from '../../helpers/property-params.js';
import { settleActions } from '../../helpers/settle.js';

const NODE = 'relay-a';
const ADDRESSES = ['192.0.2.1', '192.0.2.2', '192.0.2.3'];
const KEYS = [0, 1, 2, 3].map(() => generateSecretKey());
/** Author 0 is listed in a tier that lifts the address. */
const LISTED = getPublicKey(KEYS[0]!);
const BLOCKED_KIND = 4;

const CONFIG = GatewayConfigSchema.parse({
  admin: { token: 'write-transports-admin-token-0123' },
  upstreams: [{ id: NODE, url: 'http://127.0.0.1:9', writeBudget: { points: 6 } }],
  identity: { order: ['apiKey', 'pubkey', 'ip'] },
  quotas: {
    keyPrefix: 'wt',
    tiers: {
      default: { write: { points: 5, windowSec: 60 } },
      listed: { write: { points: 4, windowSec: 60 }, chargeAddress: false },
    },
  },
  nostr: { verify: 'auto', maxInvalidEvents: 1000, blockedKinds: [BLOCKED_KIND] },
  limits: { framesPerSecPerAddress: 1_000_000, maxTrackedClients: 256 },
});

type RelayBehaviour = 'accept' | 'refuse' | 'close' | 'stall';
type Step =
  | {
      t: 'send';
      from: number;
      author: number;
      make: 'new' | 'forged' | 'badid' | 'blocked';
      relay: RelayBehaviour;
    }
  | { t: 'replay'; from: number; of: number; relay: RelayBehaviour }
  | { t: 'pressure'; on: boolean }
  | { t: 'answer-stalled' };

const relayBehaviour = fc.constantFrom<RelayBehaviour>(
  'accept',
  'accept',
  'refuse',
  'close',
  'stall',
);
const stepArb: fc.Arbitrary<Step> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      t: fc.constant('send' as const),
      from: fc.nat(2),
      author: fc.nat(3),
      make: fc.constantFrom('new', 'new', 'forged', 'badid', 'blocked'),
      relay: relayBehaviour,
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      t: fc.constant('replay' as const),
      from: fc.nat(2),
      of: fc.nat(),
      relay: relayBehaviour,
    }),
  },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('pressure' as const), on: fc.boolean() }) },
  { weight: 1, arbitrary: fc.constant({ t: 'answer-stalled' as const }) },
);

/** An event stalled at the relay, then replayed on its own connection: held there, paid over HTTP. */
const HELD_ON_CONNECTION: Step[] = [
  { t: 'send', from: 0, author: 1, make: 'new', relay: 'stall' },
  { t: 'replay', from: 0, of: 0, relay: 'accept' },
];

/** The model relay: it verifies, keeps what it stored, answers as the step says. */
function relayAnswer(stored: Set<string>, event: Event, how: RelayBehaviour) {
  if (!verifySignature(event)) return 'invalid' as const;
  if (stored.has(event.id)) return 'duplicate' as const;
  if (how === 'refuse') return 'refused' as const;
  if (how === 'close') return 'lost' as const;
  stored.add(event.id);
  return 'stored' as const;
}

/** One gateway in process over the real decider on a fake Valkey, and its model relay. */
function gateway(start: number) {
  const clock = manualClock(start);
  const valkey = new FakeValkey(clock.now);
  const policy = new Policy(CONFIG.quotas);
  policy.setPubkeyTiers(new Map([[LISTED, 'listed']]));
  const board = new MultiplierBoard([NODE]);
  const decider = new QuotaDecider(valkey.store, policy, board, CONFIG.quotas, {
    now: clock.now,
    writeBudgets: new Map([[NODE, CONFIG.upstreams[0]!.writeBudget!]]),
    nodeCount: 1,
  });
  const kv = new MemoryKv();
  const store = { ...valkey.store, kv } as unknown as typeof valkey.store;
  const ctx = admissionServices({ config: CONFIG, store, policy, decider, board });
  const admission = new Admission(ctx, clock.now);
  /** What an identity paid: Valkey's count less the points leased here and not yet spent. */
  const paid = async (identity: Identity) => {
    const usage = (await decider.usage(identity, 'write', NODE))!;
    return usage.consumed - (usage.lease?.held ?? 0);
  };
  return { admission, board, valkey, policy, paid, stored: new Set<string>() };
}

type Gateway = ReturnType<typeof gateway>;

/** Every identity the sequence can charge: the addresses and the authors. */
function identities(g: Gateway): Identity[] {
  const salt = CONFIG.identity.keySalt;
  return [
    ...ADDRESSES.map((ip) => makeIdentity('ip', ip, 'default', salt)),
    ...KEYS.map((sk) => pubkeyIdentity('pubkey', getPublicKey(sk), g.policy, salt)),
  ];
}

/**
 * What each identity paid (Valkey's count less the points leased here and not yet spent: a
 * lease's size follows the key's rate, not its charges), and the node budget's counter.
 */
async function counts(g: Gateway): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const identity of identities(g))
    out[`${identity.source}:${identity.raw}`] = await g.paid(identity);
  out.node = g.valkey.counters.get(`${CONFIG.quotas.keyPrefix}:node:${NODE}`)?.consumed ?? 0;
  return out;
}

/** The WebSocket side: one connection per address (a new one after its relay socket closed). */
class OverWebSocket {
  readonly g: Gateway;
  private readonly conns = new Map<number, ConnectionFacts>();
  /** Stalled events, per address, awaiting their answer. */
  private readonly stalled: { from: number; event: Event }[] = [];

  constructor(start: number) {
    this.g = gateway(start);
  }

  private conn(from: number): ConnectionFacts {
    let conn = this.conns.get(from);
    if (!conn) {
      conn = { ip: ADDRESSES[from]!, nodeId: NODE, session: this.g.admission.newSession() };
      this.conns.set(from, conn);
    }
    return conn;
  }

  /** Sends one event: what differs from HTTP, if anything. */
  async send(
    from: number,
    event: Event,
    how: RelayBehaviour,
  ): Promise<TransportDifference | undefined> {
    const conn = this.conn(from);
    const frame = Buffer.from(JSON.stringify(['EVENT', event]));
    const verdict = await this.g.admission.frame(conn, frame, false);
    const said = verdict.reply?.[3];
    const message = typeof said === 'string' ? said : '';
    if (!verdict.forward) {
      return /awaits the relay's answer|awaiting the relay's answer/.test(message)
        ? 'held-on-connection'
        : undefined;
    }
    if (how === 'stall') {
      this.stalled.push({ from, event });
      return undefined;
    }
    await this.answer(from, event, how);
    return undefined;
  }

  private async answer(from: number, event: Event, how: RelayBehaviour): Promise<void> {
    const conn = this.conn(from);
    const verdict = relayAnswer(this.g.stored, event, how);
    if (verdict === 'lost') {
      // The relay socket closed: everything the connection awaits is lost, and it reconnects.
      this.stalled.splice(0, this.stalled.length, ...this.stalled.filter((s) => s.from !== from));
      await settleActions(conn.session, conn.session.upstreamGone());
      this.conns.delete(from);
      return;
    }
    const ok = {
      stored: ['OK', event.id, true, ''],
      duplicate: ['OK', event.id, true, 'duplicate: have it'],
      refused: ['OK', event.id, false, 'blocked: not here'],
      invalid: ['OK', event.id, false, 'invalid: bad signature'],
    }[verdict];
    await settleActions(conn.session, conn.session.relay(Buffer.from(JSON.stringify(ok))));
  }

  async answerStalled(): Promise<void> {
    for (const { from, event } of this.stalled.splice(0)) await this.answer(from, event, 'accept');
  }
}

/** The HTTP side: each event its own POST, its ticket settled by the model relay's answer. */
class OverHttp {
  readonly g: Gateway;
  private readonly stalled: { from: number; event: Event; ticket: WriteTicket | undefined }[] = [];

  constructor(start: number) {
    this.g = gateway(start);
  }

  async send(from: number, event: Event, how: RelayBehaviour): Promise<void> {
    const body = Buffer.from(JSON.stringify(event));
    const verdict = await this.g.admission.http({
      ip: ADDRESSES[from]!,
      method: 'POST',
      url: '/events',
      contentLength: body.length,
      eventBody: body,
    });
    if (verdict.action !== 'forward') return;
    if (how === 'stall') {
      this.stalled.push({ from, event, ticket: verdict.ticket });
      return;
    }
    await this.answer(from, event, how, verdict.ticket);
  }

  private async answer(from: number, event: Event, how: RelayBehaviour, ticket?: WriteTicket) {
    const verdict = relayAnswer(this.g.stored, event, how);
    if (verdict === 'lost') {
      // The same relay failure: what this address has outstanding is lost with it.
      const lost = this.stalled.filter((s) => s.from === from);
      this.stalled.splice(0, this.stalled.length, ...this.stalled.filter((s) => s.from !== from));
      for (const s of [...lost, { ticket }]) await s.ticket?.settle('lost');
      return;
    }
    const status = verdict === 'stored' || verdict === 'duplicate' ? 200 : 400;
    const message = {
      stored: '',
      duplicate: 'duplicate: have it',
      refused: 'blocked: no',
      invalid: 'invalid: bad signature',
    }[verdict];
    await ticket?.settle(relayVerdictOf(status, message));
  }

  async answerStalled(): Promise<void> {
    for (const s of this.stalled.splice(0)) await this.answer(s.from, s.event, 'accept', s.ticket);
  }
}

function eventOf(step: Extract<Step, { t: 'send' }>, n: number): Event {
  const sk = KEYS[step.author]!;
  const genuine = signedEvent(step.make === 'blocked' ? BLOCKED_KIND : 1, `note ${n}`, sk);
  if (step.make === 'forged') return { ...genuine, sig: signedEvent(1, 'other').sig };
  if (step.make === 'badid') return { ...genuine, content: `${genuine.content} (edited)` };
  return genuine;
}

/** Runs the steps on both transports; returns the differences met, by step. */
async function drive(steps: readonly Step[], ws: OverWebSocket, http: OverHttp) {
  const sent: Event[] = [];
  const held: string[] = [];
  for (const [i, step] of steps.entries()) {
    if (step.t === 'pressure') {
      for (const side of [ws, http]) side.g.board.setOverride(NODE, step.on ? 0.5 : null);
      continue;
    }
    if (step.t === 'answer-stalled') {
      await ws.answerStalled();
      await http.answerStalled();
      continue;
    }
    const event = step.t === 'send' ? eventOf(step, i) : sent[step.of % Math.max(1, sent.length)];
    if (!event) continue;
    if (step.t === 'send') sent.push(event);
    const difference = await ws.send(step.from, event, step.relay);
    // A listed difference: HTTP cannot express this step the same way, so it is not sent.
    if (difference) {
      assert.ok(difference in TRANSPORT_DIFFERENCES);
      held.push(`${i}:${difference}`);
      continue;
    }
    await http.send(step.from, event, step.relay);
  }
  await ws.answerStalled();
  await http.answerStalled();
  return held;
}

describe('one write pipeline: WebSocket and HTTP charge the same', { timeout: 120_000 }, () => {
  before(() => initSignatureVerifier());

  it('every identity, the node budget and the seen ids end equal over a generated sequence', async () => {
    let heldSeen = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(stepArb, { minLength: 1, maxLength: 24 }), async (steps) => {
        const start = Date.now();
        const ws = new OverWebSocket(start);
        const http = new OverHttp(start);
        const held = await drive(steps, ws, http);
        heldSeen += held.length;
        assert.deepEqual(
          await counts(http.g),
          await counts(ws.g),
          `charges differ, HTTP then WebSocket (held apart: ${held.join(', ') || 'none'})`,
        );
        assert.deepEqual([...http.g.stored].sort(), [...ws.g.stored].sort(), 'stored differs');
      }),
      // The generated runs meet a listed difference about six times in 150, so a seed that
      // meets none is rare but real (CI met one): this example meets it on every seed.
      { ...propertyParams(150), examples: [[HELD_ON_CONNECTION]] },
    );
    assert.ok(heldSeen > 0, 'a listed difference was met at least once (the sequences reach it)');
  });

  it("an event POSTed while the node's budget is spent gives its author's charge back", async () => {
    const http = new OverHttp(Date.now());
    http.g.board.setOverride(NODE, 0.5);
    // Spend the node's budget at m = 0.5 (3 of 6) with other authors, from other addresses.
    for (let n = 0; n < 3; n++) await http.send(n, signedEvent(1, `spend ${n}`), 'accept');
    const author = pubkeyIdentity(
      'pubkey',
      getPublicKey(KEYS[1]!),
      http.g.policy,
      CONFIG.identity.keySalt,
    );
    const replayed = signedEvent(1, 'replayed while the budget is spent', KEYS[1]);
    for (let n = 0; n < 5; n++) await http.send(n % 3, replayed, 'accept');
    const paid = await http.g.paid(author);
    assert.equal(paid, 0, `the author paid ${paid} for 5 replays the node's budget refused`);
  });
});
