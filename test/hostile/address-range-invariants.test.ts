/**
 * The invariants of nested address ranges, over generated sequences of writes from generated
 * addresses (spelled every way a client or proxy may: compressed, expanded, upper case, zone
 * ids, ports, IPv4-mapped), each judged by the real admission step and decider on a real Valkey
 * (standalone and cluster), its client read through a trusted proxy's X-Forwarded-For:
 *
 * 1. no key (a client, its /56, its /48; an IPv4 address, its /24) is ever admitted past its
 *    limit in a window;
 * 2. writes of one /48 (one /24) never consume points of another: each network's writes judged
 *    alone, on fresh counters, are answered exactly as they were among the others;
 * 3. every answer is the model's: each key counts the write, the tightest refuses, and a refused
 *    write gives back what the keys that admitted it took (a refusing key keeps its count).
 *
 * The generator knows each address's networks by construction (group numbers, not masks), so
 * the model does not share the gateway's address maths.
 */
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { GatewayConfigSchema } from '../../src/config/schema.js';
import { Admission } from '../../src/gateway/admission.js';
import { ClientAddress } from '../../src/gateway/client-address.js';
import { MultiplierBoard } from '../../src/pressure/follower/board.js';
import { QuotaDecider } from '../../src/quota/decider.js';
import { Policy } from '../../src/quota/policy.js';
import type { Store } from '../../src/store/index.js';
import { suiteStore, uniquePrefix } from '../helpers/env.js';
import { admissionServices } from '../helpers/fake-admission-context.js';
import { propertyParams } from '../helpers/property-params.js';

const LIMITS = { client: 3, '/56': 5, '/48': 8, '/24': 5 } as const;
const WINDOW_SEC = 3600;

/** A write's sender: where it is by construction, and how its address is spelled. */
type Sender =
  | { family: 'v6'; n48: number; n56: number; n64: number; host: number[]; spelling: number }
  | { family: 'v4'; n24: number; host: number; spelling: number };

const v6Sender = fc.record({
  family: fc.constant('v6' as const),
  n48: fc.nat(2),
  n56: fc.nat(1),
  n64: fc.nat(2),
  host: fc.array(fc.integer({ min: 0, max: 0xffff }), { minLength: 4, maxLength: 4 }),
  spelling: fc.nat(5),
});
const v4Sender = fc.record({
  family: fc.constant('v4' as const),
  n24: fc.nat(1),
  host: fc.integer({ min: 1, max: 3 }),
  spelling: fc.nat(3),
});
const senders = fc.array(fc.oneof({ weight: 3, arbitrary: v6Sender }, v4Sender), {
  minLength: 1,
  maxLength: 60,
  size: 'max',
});

/** The address as a client or proxy might write it. */
function spell(s: Sender): string {
  if (s.family === 'v4') {
    const octets = [198, 51, 100 + s.n24, s.host];
    const dotted = octets.join('.');
    const hex = (a: number, b: number) => ((a << 8) | b).toString(16);
    return [
      dotted,
      `::ffff:${dotted}`,
      `::FFFF:${hex(octets[0]!, octets[1]!)}:${hex(octets[2]!, octets[3]!)}`.toUpperCase(),
      `${dotted}:40${s.host}`,
    ][s.spelling]!;
  }
  // 2001:db8:<the /48>:<the /56 in the high byte, the /64 in the low>:<host>.
  const groups = [0x2001, 0xdb8, 0x10 + s.n48, (s.n56 << 8) | s.n64, ...s.host];
  const short = groups.map((g) => g.toString(16)).join(':');
  const long = groups.map((g) => g.toString(16).padStart(4, '0')).join(':');
  const zeros =
    groups
      .slice(0, 4)
      .map((g) => g.toString(16))
      .join(':') +
    '::' +
    s.host[3]!.toString(16);
  return [short, long.toUpperCase(), `${short}%eth0`, `[${long}]:443`, zeros, `[${short}]`][
    s.spelling
  ]!;
}

/** The keys a write pays, by construction, with each key's limit. */
function keysOf(s: Sender): [string, number][] {
  if (s.family === 'v4') {
    return [
      [`v4 ${s.n24}.${s.host}`, LIMITS.client],
      [`v4 ${s.n24} /24`, LIMITS['/24']],
    ];
  }
  // The zeros spelling drops the host's middle groups: still the same /64 (only the host moves).
  return [
    [`v6 ${s.n48}.${s.n56}.${s.n64}`, LIMITS.client],
    [`v6 ${s.n48}.${s.n56} /56`, LIMITS['/56']],
    [`v6 ${s.n48} /48`, LIMITS['/48']],
  ];
}

/** The network whose writes no other network's may touch: the /48, or the /24. */
const networkOf = (s: Sender) => (s.family === 'v4' ? `v4 ${s.n24}` : `v6 ${s.n48}`);

/** Refusals the model made, by the kind of key that refused (so a run is seen to test each). */
const refusedBy = new Map<string, number>();

/** The model: each key counts; the tightest refuses; a refusal gives back what admitted it. */
function modelAnswers(writes: readonly Sender[]): boolean[] {
  const counts = new Map<string, number>();
  return writes.map((s) => {
    const keys = keysOf(s);
    for (const [key] of keys) counts.set(key, (counts.get(key) ?? 0) + 1);
    const refusing = keys.filter(([key, limit]) => counts.get(key)! > limit);
    if (refusing.length === 0) return true;
    for (const [key] of refusing) {
      const kind = key.split(' ')[2] ?? 'client';
      refusedBy.set(kind, (refusedBy.get(kind) ?? 0) + 1);
    }
    for (const [key, limit] of keys) {
      if (counts.get(key)! <= limit) counts.set(key, counts.get(key)! - 1);
    }
    return false;
  });
}

/** One gateway's admission step in process, on the suite's Valkey, with fresh counters. */
function gatewayOn(store: Store) {
  const config = GatewayConfigSchema.parse({
    admin: { token: 'range-invariants-admin-token-0123' },
    upstreams: [{ id: 'relay-a', url: 'http://127.0.0.1:9' }],
    trustedProxies: ['127.0.0.1'],
    quotas: {
      keyPrefix: uniquePrefix('ranges'),
      tiers: { default: { write: { points: LIMITS.client, windowSec: WINDOW_SEC } } },
      ranges: {
        enabled: true,
        ipv6: [
          { prefixLength: 56, write: { points: LIMITS['/56'], windowSec: WINDOW_SEC } },
          { prefixLength: 48, write: { points: LIMITS['/48'], windowSec: WINDOW_SEC } },
        ],
        ipv4: [{ prefixLength: 24, write: { points: LIMITS['/24'], windowSec: WINDOW_SEC } }],
      },
    },
  });
  const policy = new Policy(config.quotas);
  const board = new MultiplierBoard(['relay-a']);
  const decider = new QuotaDecider(store, policy, board, config.quotas);
  const ctx = admissionServices({ config, store, policy, decider, board });
  const admission = new Admission(ctx);
  const address = new ClientAddress(config.trustedProxies, {
    ipv6PrefixLength: config.identity.ipv6PrefixLength,
  });
  /** One HTTP write through the trusted proxy: admitted (forwarded) or not. */
  const write = async (s: Sender): Promise<boolean> => {
    const req = {
      socket: { remoteAddress: '127.0.0.1' },
      headers: { 'x-forwarded-for': spell(s) },
    } as unknown as IncomingMessage;
    const verdict = await admission.http({
      method: 'POST',
      url: '/ingest',
      ip: address.ip(req),
      contentLength: 2,
    });
    return verdict.action === 'forward';
  };
  return { write, close: () => decider.close() };
}

async function answersOf(store: Store, writes: readonly Sender[]): Promise<boolean[]> {
  const gw = gatewayOn(store);
  try {
    const answers: boolean[] = [];
    for (const s of writes) answers.push(await gw.write(s));
    return answers;
  } finally {
    await gw.close();
  }
}

for (const mode of ['standalone', 'cluster'] as const) {
  describe(`address ranges over generated writes (${mode})`, { timeout: 240_000 }, () => {
    const store = suiteStore('iovalkey', mode);

    it("no key past its limit; no /48 (/24) touches another; every answer the model's", async () => {
      refusedBy.clear();
      await fc.assert(
        fc.asyncProperty(senders, async (writes) => {
          const answers = await answersOf(store(), writes);
          // 1: no key admitted past its limit.
          const admittedBy = new Map<string, number>();
          writes.forEach((s, i) => {
            if (!answers[i]) return;
            for (const [key, limit] of keysOf(s)) {
              const n = (admittedBy.get(key) ?? 0) + 1;
              admittedBy.set(key, n);
              assert.ok(n <= limit, `${key} admitted ${n} writes, past its ${limit}`);
            }
          });
          // 2: each network's writes alone, on fresh counters, answered as among the others.
          for (const network of new Set(writes.map(networkOf))) {
            const mine = writes.flatMap((s, i) => (networkOf(s) === network ? [i] : []));
            const alone = await answersOf(
              store(),
              mine.map((i) => writes[i]!),
            );
            assert.deepEqual(
              alone,
              mine.map((i) => answers[i]),
              `${network}'s writes are answered otherwise beside other networks`,
            );
          }
          // 3: the model's answers.
          assert.deepEqual(answers, modelAnswers(writes));
        }),
        { ...propertyParams(mode === 'cluster' ? 30 : 80), includeErrorInReport: true },
      );
      console.log(`refusals by kind over the runs (${mode}): ${JSON.stringify([...refusedBy])}`);
      for (const kind of ['client', '/56', '/48', '/24']) {
        assert.ok((refusedBy.get(kind) ?? 0) > 0, `no generated run was refused by a ${kind}`);
      }
    });
  });
}
