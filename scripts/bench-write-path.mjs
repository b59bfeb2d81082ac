#!/usr/bin/env node
/* global console, process, Buffer */
// CPU per Nostr EVENT through the gateway's admission in process (no sockets, no relay): the
// frame judged (the default path, authors far from their limit charged on the hash), then
// the relay's OK settled, over the real decider on the test suite's fake Valkey. For comparing
// builds side by side: node scripts/bench-write-path.mjs [DIST] (default ./dist), alternating
// two builds' dist folders in one session. Events are signed once into /tmp/sluice-write-path.json;
// with --long-tail, every event by a key of its own (a public relay's authors, each unknown);
// --quotas-off judges the frames with quotas off (what the quota path adds is the difference);
// --events N signs N events (default 6000; the first 1000 warm up).
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { finalizeEvent, generateSecretKey } from 'nostr-tools/pure';

const args = process.argv.slice(2);
const longTail = args.includes('--long-tail');
const quotasOff = args.includes('--quotas-off');
const eventsAt = args.indexOf('--events');
const EVENTS = eventsAt >= 0 ? Number(args[eventsAt + 1]) : 6000;
const root = resolve(args.find((a, i) => !a.startsWith('--') && i !== eventsAt + 1) ?? 'dist');
const WARM = 1000;
const { admissionUnderTest } = await import(`${root}/test/helpers/fake-admission-context.js`);
const { FakeValkey, manualClock } = await import(`${root}/test/helpers/fake-valkey.js`);
const { QuotaDecider } = await import(`${root}/src/quota/decider.js`);
const { initSignatureVerifier } = await import(`${root}/src/nostr/frames.js`);
await initSignatureVerifier();

const file = `/tmp/sluice-write-path${longTail ? '-long-tail' : ''}-${EVENTS}.json`;
if (!existsSync(file)) {
  const keys = Array.from({ length: longTail ? EVENTS : 200 }, () => generateSecretKey());
  const now = Math.floor(Date.now() / 1000);
  const events = Array.from({ length: EVENTS }, (_, i) =>
    finalizeEvent(
      { kind: 1, created_at: now, tags: [], content: `note ${i}` },
      keys[i % keys.length],
    ),
  );
  writeFileSync(file, JSON.stringify(events));
}
const frames = JSON.parse(readFileSync(file, 'utf8')).map((e) => [
  e.id,
  Buffer.from(JSON.stringify(['EVENT', e])),
]);

const under = admissionUnderTest(
  {
    identity: { order: ['pubkey', 'ip'] },
    nostr: { verify: 'auto' },
    quotas: {
      enabled: !quotasOff,
      tiers: { default: { write: { points: 1_000_000, windowSec: 60 } } },
    },
    limits: { framesPerSecPerAddress: 1e9 },
  },
  [],
);
const clock = manualClock(Date.now());
const board = { get: () => ({ value: 1 }), onChange: () => undefined };
under.ctx.decider = new QuotaDecider(
  new FakeValkey(clock.now).store,
  under.ctx.policy,
  board,
  under.config.quotas,
  { now: clock.now },
);
const conn = { ip: '192.0.2.1', nodeId: 'relay-a', session: under.admission.newSession() };

async function pass(list) {
  for (const [id, frame] of list) {
    await under.admission.frame(conn, frame, false);
    const ok = Buffer.from(JSON.stringify(['OK', id, true, '']));
    for (const action of conn.session.relay(ok)) {
      // This build's settlement: a ticket, or (before issue 31) the admission's act().
      if (action.ticket) await action.ticket.settle(action.verdict);
      else if (under.admission.act) await under.admission.act(conn, action);
    }
  }
}
await pass(frames.slice(0, WARM)); // every author known, with room to spare (long tail: none)
const start = process.cpuUsage();
await pass(frames.slice(WARM));
const used = process.cpuUsage(start);
console.log(
  `${root}${longTail ? ' (long tail)' : ''}${quotasOff ? ' (quotas off)' : ''}: ${((used.user + used.system) / (EVENTS - WARM)).toFixed(1)} µs CPU per EVENT`,
);
