import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { finalizeEvent, generateSecretKey } from 'nostr-tools/pure';
import { DEFAULT_LEAD_LAW_PARAMS } from '../../src/pressure/laws/lead-law.js';
import type { ClientKind, Topology } from '../../src/store/index.js';
import { PRESSURE_CHANNEL, decodeReport, pressureKey } from '../../src/pressure/report.js';
import { createStore } from '../../src/store/index.js';
import { storeOptions } from '../helpers/env.js';
import { admin, request, startGateway } from '../helpers/gateway.js';
import type { GatewayUnderTest } from '../helpers/gateway.js';
import { relayAdminHeaders, startFeed, startRelay } from '../helpers/processes.js';
import { clearLawParams } from '../helpers/pressure.js';
import type { RelayProcess, SluiceProcess } from '../helpers/processes.js';

const MiB = 1024 * 1024;
const DRAIN = 1.5 * MiB;
const EVENT_CONTENT = 32 * 1024;
/** Writes per second the quota admits at m = 1: about 3x what relay-a drains. */
const QUOTA_PER_SEC = 150;
const SAFE = 0.5;

interface NodeView {
  multiplier: number;
  source: string;
  feedState: string | null;
}

async function nodes(gw: GatewayUnderTest): Promise<Record<string, NodeView>> {
  return (
    JSON.parse((await admin(gw, 'GET', '/admin/flow-control')).body) as {
      nodes: Record<string, NodeView>;
    }
  ).nodes;
}

async function stats(relay: RelayProcess): Promise<{ rssAnonBytes: number; backlogBytes: number }> {
  return JSON.parse((await request(`${relay.url}/stats`)).body) as {
    rssAnonBytes: number;
    backlogBytes: number;
  };
}

async function waitFor(
  what: string,
  check: () => Promise<boolean>,
  timeoutMs: number,
): Promise<number> {
  const started = Date.now();
  while (!(await check())) {
    if (Date.now() - started > timeoutMs) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await sleep(50);
  }
  return Date.now() - started;
}

function feedFor(
  nodeId: string,
  relay: RelayProcess,
  targetBytes: number,
  client: ClientKind,
  mode: Topology,
) {
  return startFeed({ nodeId, relayUrl: relay.url, targetBytes, tickMs: 250, client, mode });
}

/**
 * One client per topology: what this loop adds to the per-client tests (the store's pub/sub
 * and leased keys in store-pubsub.test.ts, the feed's publishing in feed.test.ts, each for
 * all six) is the control behaviour, which no client changes.
 */
const CASES: { client: ClientKind; mode: Topology }[] = [
  { client: 'iovalkey', mode: 'standalone' },
  { client: 'valkey-glide', mode: 'cluster' },
];

for (const { client, mode } of CASES) {
  // About 25 s when it passes; bounded so that a stuck step fails the case, not the run.
  describe(`closed loop with ${client} on ${mode}`, { timeout: 180_000 }, () => {
    // Empty until started, so `after` stops whatever a failed `before` did start.
    let relays: RelayProcess[] = [];
    let feeds: SluiceProcess[] = [];
    let gateways: GatewayUnderTest[] = [];
    let targetA: number;
    const sk = generateSecretKey();
    const pool = Array.from({ length: 2500 }, (_, i) =>
      JSON.stringify(
        finalizeEvent(
          {
            kind: 1,
            created_at: 1_700_000_000 + i,
            tags: [],
            content: `${i} ${'x'.repeat(EVENT_CONTENT)}`,
          },
          sk,
        ),
      ),
    );

    before(async () => {
      await clearLawParams(client, mode, ['relay-a', 'relay-b']);
      relays = await Promise.all([
        startRelay({ nodeId: 'relay-a', drainBytesPerSec: DRAIN }),
        startRelay({ nodeId: 'relay-b', drainBytesPerSec: DRAIN }),
      ]);
      const [a, b] = await Promise.all(relays.map(stats));
      // Room for ~48 MiB of backlog above what the idle relay holds.
      targetA = a!.rssAnonBytes + 48 * MiB;
      feeds = await Promise.all([
        feedFor('relay-a', relays[0]!, targetA, client, mode),
        feedFor('relay-b', relays[1]!, b!.rssAnonBytes + 48 * MiB, client, mode),
      ]);
      const settings = {
        quotas: {
          keyPrefix: `loop-${client}-${mode}-${Date.now()}`,
          tiers: { default: { write: { points: QUOTA_PER_SEC, windowSec: 1 } } },
        },
        pressure: {
          enabled: true,
          safeMultiplier: SAFE,
          staleAfterMs: 750,
          holdMs: 1000,
          evaluateMs: 100,
          freshReportsToTrust: 3,
          rampUpPerSec: 0.2,
        },
        limits: { maxBodyBytes: 256 * 1024 },
      };
      const upstreams = [
        { id: 'relay-a', url: relays[0]!.url },
        { id: 'relay-b', url: relays[1]!.url },
      ];
      gateways = await Promise.all([
        startGateway(client, mode, upstreams, settings),
        startGateway(client, mode, upstreams, settings),
      ]);
    });

    after(async () => {
      await Promise.all([...gateways.map((g) => g.proc.stop()), ...feeds.map((f) => f.stop())]);
      await Promise.all(relays.map((r) => r.stop()));
    });

    it("lowers relay-a's quota under a flood, keeps memory bounded, leaves relay-b alone, and handles a dead feed", async () => {
      // Both gateways trust both feeds: fresh, at 1.0 for idle relays. A trusted feed starts
      // at the safe value and ramps up, each node on its own schedule: wait for both to reach
      // 1 before the flood asserts relay-b stays there.
      for (const gw of gateways) {
        await waitFor(
          'feeds fresh, both nodes at 1',
          async () => {
            const n = await nodes(gw);
            return ['relay-a', 'relay-b'].every(
              (id) => n[id]?.feedState === 'fresh' && n[id]?.multiplier === 1,
            );
          },
          15_000,
        );
      }
      // A source address whose sticky node is relay-a.
      let from = '';
      for (let i = 2; i < 60 && !from; i++) {
        const candidate = `127.0.8.${i}`;
        const ev = pool[i]!;
        await request(`${gateways[0]!.url}/events`, { method: 'POST', body: ev, from: candidate });
        const id = (JSON.parse(ev) as { id: string }).id;
        const onA = JSON.parse(
          (await request(`${relays[0]!.url}/events?ids=${id}`)).body,
        ) as unknown[];
        if (onA.length === 1) from = candidate;
      }
      assert.ok(from, 'found a client address routed to relay-a');

      // The flood: as fast as the quota lets it, through both gateways, for 15 s.
      // Admission times, and what each gateway enforced for relay-a, sampled over the flood.
      const admittedAt: number[] = [];
      const enforced: { at: number; highest: number }[] = [];
      const minM: number[] = [];
      let peakRss = 0;
      let next = 100;
      const keyStore = await createStore(storeOptions(client, mode));
      const floodEnd = Date.now() + 15_000;
      // Cleared when the flood ends early (a failed check), so no writer outlives the test.
      let flooding = true;
      const floodOn = () => flooding && Date.now() < floodEnd;
      const writers = Array.from({ length: 8 }, async (_, w) => {
        while (floodOn()) {
          const body = pool[next++ % pool.length]!;
          const res = await request(`${gateways[w % 2]!.url}/events`, {
            method: 'POST',
            body,
            from,
          });
          if (res.status === 200) {
            admittedAt.push(Date.now());
          } else {
            assert.equal(res.status, 429, res.body);
            await sleep(Number(res.headers['retry-after'] ?? 1) * 50);
          }
        }
      });
      let feedLoweredAt: number | undefined;
      let checkedPropagation = false;
      const watcher = (async () => {
        while (floodOn()) {
          peakRss = Math.max(peakRss, (await stats(relays[0]!)).rssAnonBytes);
          const published = decodeReport(await keyStore.kv.get(pressureKey('relay-a')));
          if (published && published.m < 1) feedLoweredAt ??= Date.now();
          const views = await Promise.all(gateways.map(nodes));
          const ms = views.map((v) => v['relay-a']!.multiplier);
          minM.push(Math.min(...ms));
          enforced.push({ at: Date.now(), highest: Math.max(...ms) });
          for (const v of views) {
            const b = v['relay-b']!;
            assert.equal(b.multiplier, 1, `relay-b is not under pressure: ${JSON.stringify(b)}`);
          }
          // Drops apply at once: within 2 s of the feed lowering m (the watcher samples every
          // 200 ms or so, slower on a busy machine), both gateways have it.
          if (feedLoweredAt !== undefined && !checkedPropagation) {
            checkedPropagation = views.every((v) => v['relay-a']!.multiplier < 1);
            assert.ok(
              checkedPropagation || Date.now() - feedLoweredAt < 2000,
              `both gateways applied the lower m: ${JSON.stringify(views.map((v) => v['relay-a']))}`,
            );
          }
          await sleep(200);
        }
      })();
      try {
        await Promise.all([...writers, watcher]);
      } finally {
        // An open store client would keep this file's process alive after a failure.
        flooding = false;
        await Promise.allSettled([...writers, watcher]);
        await keyStore.close();
      }
      assert.ok(
        checkedPropagation,
        'the feed lowered m during the flood, and both gateways followed',
      );

      const lowest = Math.min(...minM);
      assert.ok(lowest < 0.9, `relay-a's multiplier fell (lowest ${lowest})`);
      // What the law promises, whatever the machine's load: once both gateways apply a lower
      // multiplier, each 1 s window of the quota admits at most the quota times the
      // multiplier in force while it runs. Cut the span into 1 s buckets: a window overlaps at
      // most the bucket it starts in and the next, so it is bounded by the highest multiplier
      // either gateway showed in those two (sampled: between samples it rises by at most the
      // ramp); the window already open at the start is bounded by the full quota. Load can
      // only lower the admitted count, never raise it.
      const lowFrom = enforced.find((e) => e.highest < 1)?.at;
      assert.ok(lowFrom !== undefined, 'both gateways enforced a multiplier below 1');
      const span = enforced.filter((e) => e.at >= lowFrom);
      const spanEnd = span.at(-1)!.at;
      const buckets = Math.ceil((spanEnd - lowFrom) / 1000) || 1;
      const highestIn = (k: number) => {
        const inside = span.filter(
          (e) => e.at >= lowFrom + k * 1000 && e.at < lowFrom + (k + 2) * 1000,
        );
        // A sample just before the bucket covers a bucket without one of its own.
        const before = span.filter((e) => e.at < lowFrom + k * 1000).at(-1);
        const seen = [...inside, ...(before ? [before] : [])].map((e) => e.highest);
        const gapSec = Math.max(0.2, ...span.slice(1).map((e, i) => (e.at - span[i]!.at) / 1000));
        return Math.min(1, Math.max(...seen) + 0.2 * gapSec);
      };
      let bound = QUOTA_PER_SEC;
      for (let k = 0; k < buckets; k++) bound += Math.ceil(QUOTA_PER_SEC * highestIn(k));
      const admitted = admittedAt.filter((t) => t >= lowFrom && t <= spanEnd).length;
      assert.ok(
        admitted <= bound,
        `admitted ${admitted} in ${buckets} s under a lowered multiplier: at most ${bound}`,
      );
      const margin = DEFAULT_LEAD_LAW_PARAMS.uEmerg;
      assert.ok(
        peakRss < targetA * margin,
        `peak ${peakRss / MiB} MiB < target ${targetA / MiB} MiB x ${margin}`,
      );

      // A client of relay-b still gets its whole quota while relay-a is throttled.
      let fullQuotaSeen = false;
      for (let i = 60; i < 120 && !fullQuotaSeen; i++) {
        const res = await request(`${gateways[0]!.url}/events`, {
          method: 'POST',
          body: pool[i]!,
          from: `127.0.8.${i}`,
        });
        const id = (JSON.parse(pool[i]!) as { id: string }).id;
        const onB = JSON.parse(
          (await request(`${relays[1]!.url}/events?ids=${id}`)).body,
        ) as unknown[];
        if (onB.length === 1) {
          assert.equal(res.headers['ratelimit-policy'], `"writes";q=${QUOTA_PER_SEC};w=1`);
          fullQuotaSeen = true;
        }
      }
      assert.ok(fullQuotaSeen, 'found a client of relay-b');

      // Drain relay-a quickly now, so its feed returns to 1 and the ramp below is the gateways' own.
      await request(`${relays[0]!.url}/admin/drain`, {
        method: 'POST',
        headers: relayAdminHeaders(),
        body: JSON.stringify({ bytesPerSec: 256 * MiB }),
      });
      await waitFor(
        'backlog drained',
        async () => (await stats(relays[0]!)).backlogBytes === 0,
        15_000,
      );

      // The feed of relay-a dies: both gateways move to the safe value, never above the last
      // fresh value. The gateways may still be ramping towards what the feed last published
      // (until it goes stale), so the bound is the highest of what they enforced and what the
      // feed published up to its death, not what they showed at one instant.
      let lastFresh = Math.max(
        ...(await Promise.all(gateways.map(nodes))).map((v) => v['relay-a']!.multiplier),
      );
      const reportWatch = await createStore(storeOptions(client, mode));
      const reports = await reportWatch.subscribe(PRESSURE_CHANNEL, (text) => {
        const r = decodeReport(text);
        if (r?.node === 'relay-a') lastFresh = Math.max(lastFresh, r.m);
      });
      try {
        // What it published before the subscription began is in its key.
        const published = decodeReport(await reportWatch.kv.get(pressureKey('relay-a')));
        if (published) lastFresh = Math.max(lastFresh, published.m);
        await feeds[0]!.stop();
        for (const gw of gateways) {
          await waitFor(
            'safe value after the feed died',
            async () => {
              const v = (await nodes(gw))['relay-a']!;
              assert.ok(
                v.multiplier <= Math.max(lastFresh, SAFE) + 1e-9,
                `stale value ${v.multiplier} above the last fresh ${lastFresh}`,
              );
              return v.feedState === 'safe' && v.multiplier <= SAFE;
            },
            10_000,
          );
        }
      } finally {
        await reports.close();
        await reportWatch.close();
      }

      // The feed returns: trusted after a few reports, then a ramp up to what it reports, not a jump.
      feeds[0] = await feedFor('relay-a', relays[0]!, targetA, client, mode);
      const store = await createStore(storeOptions(client, mode));
      try {
        // Each value is compared with the one before over the longest time the gateway can
        // have had between them: from before the earlier request to after the later answer
        // (a slow answer must not read as a fast rise).
        let lastSentAt = Date.now();
        let last = (await nodes(gateways[0]!))['relay-a']!.multiplier;
        let rose = false;
        await waitFor(
          'the gateway rises above the safe value and follows the returned feed',
          async () => {
            const sentAt = Date.now();
            const v = (await nodes(gateways[0]!))['relay-a']!;
            const now = Date.now();
            const allowed = 0.2 * ((now - lastSentAt) / 1000) + 0.05 + 1e-9; // slew plus one quantisation step
            assert.ok(
              v.multiplier - last <= allowed,
              `jumped ${last} -> ${v.multiplier} in ${now - lastSentAt} ms`,
            );
            rose ||= v.multiplier > SAFE;
            last = v.multiplier;
            lastSentAt = sentAt;
            const published = decodeReport(await store.kv.get(pressureKey('relay-a')));
            return (
              rose &&
              v.feedState === 'fresh' &&
              published !== undefined &&
              Math.abs(published.m - v.multiplier) < 0.051
            );
          },
          20_000,
        );
        assert.ok(rose, 'the multiplier rose above the safe value once the feed was trusted');
      } finally {
        await store.close();
      }
    });
  });
}
