/**
 * nostr.trust's walk in a worker thread (TrustGraph, trust-worker.ts), against a relay of the
 * test's own: every way a walk can end without its answer (the relay cutting the connection
 * mid-answer, a frame the worker's bounded heap has no room to parse, the worker running out
 * of its heap, the worker ended from outside) is a failed refresh, the gateway's process
 * untouched, the set in force keeps serving and the next refresh, in a new worker,
 * succeeds; and stop() ends a running walk, leaving nothing to keep the process alive.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import type { Worker } from 'node:worker_threads';
import { finalizeEvent, generateSecretKey, getPublicKey } from 'nostr-tools/pure';
import type { Event } from 'nostr-tools/pure';
import { TrustGraph } from '../../../src/trust/trust-graph.js';
import type {
  RefreshReport,
  TrustGraphDeps,
  TrustSettings,
} from '../../../src/trust/trust-graph.js';
import { followListRelay } from '../../helpers/follow-relay.js';
import { waitFor } from '../../helpers/raw-socket.js';

const key = () => {
  const sk = generateSecretKey();
  return { sk, pk: getPublicKey(sk) };
};
const [SEED, A, B] = [key(), key(), key()];

/** `promise`, or a failure naming `what` at `ms`. */
async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} took over ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

const followList = (sk: Uint8Array, follows: string[], createdAt: number): Event =>
  finalizeEvent(
    { kind: 3, created_at: createdAt, tags: follows.map((p) => ['p', p]), content: '' },
    sk,
  );

const settings: TrustSettings = {
  tier: 'followed',
  seeds: [SEED.pk],
  hops: 1,
  refreshSec: 3600,
  // Far beyond each test: no failure here is the walk's own deadline.
  timeoutSec: 60,
  maxPubkeys: 1000,
  maxFollowsPerList: 1000,
  authorsPerReq: 10,
  maxEventBytes: 32 * 1024 * 1024,
  verifySignatures: true,
};

/** What the relay answers: the seed's list, or the ways of failing. */
let mode: 'list' | 'cut' | 'huge' | 'silent' = 'list';
let list = followList(SEED.sk, [A.pk], 1000);
/**
 * A list whose tags are 3,000,000 empty objects (9 MB): parsed, about 190 MB, far past what a
 * 64 MB heap has; in one uninterruptible JSON.parse, which V8 cannot stop at the limit.
 */
let huge: string | undefined;

describe('the trust walk in a worker thread', { timeout: 120_000 }, () => {
  let relay: Awaited<ReturnType<typeof followListRelay>> | undefined;
  before(async () => {
    relay = await followListRelay((authors, send, socket) => {
      if (mode === 'silent') return;
      if (mode === 'huge') {
        huge ??= JSON.stringify(['EVENT', '$SUB', { ...list, tags: [] }]).replace(
          '"tags":[]',
          `"tags":[${'{},'.repeat(2_999_999)}{}]`,
        );
        send(huge);
        return;
      }
      send(JSON.stringify(['EVENT', '$SUB', list]));
      if (mode === 'cut') socket.terminate();
      else send(JSON.stringify(['EOSE', '$SUB']));
    });
  });
  after(() => relay?.close());

  const graphOf = (deps: Partial<TrustGraphDeps> = {}) => {
    const reports: RefreshReport[] = [];
    // `deps` itself (a test may change it between refreshes), completed.
    const graph = new TrustGraph(
      settings,
      Object.assign(deps, {
        url: relay!.url,
        swapped: () => undefined,
        report: (r: RefreshReport) => reports.push(r),
      }),
    );
    return { graph, reports };
  };

  /** A first refresh that succeeds: the set in force, A in it. */
  async function served(deps: Partial<TrustGraphDeps> = {}) {
    mode = 'list';
    list = followList(SEED.sk, [A.pk], 1000);
    const { graph, reports } = graphOf(deps);
    const first = await graph.refresh();
    assert.equal(first.ok, true, first.error);
    assert.ok(graph.set.has(A.pk) && !graph.set.has(B.pk));
    return { graph, reports, first: graph.set };
  }

  /** After a failure: the old set still serves, and the next refresh (a new worker) succeeds. */
  async function recovers(graph: TrustGraph, old: unknown) {
    assert.equal(graph.set, old, 'the set in force was replaced by a failed refresh');
    assert.ok(graph.set.has(A.pk));
    mode = 'list';
    list = followList(SEED.sk, [A.pk, B.pk], 2000);
    const next = await graph.refresh();
    assert.equal(next.ok, true, next.error);
    assert.ok(graph.set.has(B.pk), 'the next refresh did not swap its set in');
    assert.deepEqual([next.pubkeys, next.lists, next.edges, next.perHop], [3, 1, 2, [1, 2]]);
  }

  it('fails a refresh whose relay cuts the connection mid-answer, then recovers', async () => {
    const { graph, reports, first } = await served();
    mode = 'cut';
    const failed = await graph.refresh();
    assert.equal(failed.ok, false);
    assert.match(failed.error ?? '', /closed the connection/);
    // The report of a failure gives the set in force.
    assert.deepEqual([failed.pubkeys, failed.bytes], [2, 64]);
    assert.deepEqual(reports.at(-1), failed);
    await recovers(graph, first);
  });

  it('refuses a frame its heap has no room to parse, then recovers', async () => {
    const deps: Partial<TrustGraphDeps> = {};
    const { graph, first } = await served(deps);
    // Read into a 12 MB heap, the frame would end this whole process (V8's fatal
    // out-of-memory), not the worker: relay-follow-source.ts, PARSE_ROOM.
    deps.resourceLimits = { maxOldGenerationSizeMb: 12 };
    mode = 'huge';
    const failed = await graph.refresh();
    assert.equal(failed.ok, false);
    assert.match(failed.error ?? '', /^a frame of \d+ bytes has no room in the heap/);
    delete deps.resourceLimits;
    await recovers(graph, first);
  });

  it('fails a refresh whose worker runs out of its heap, then recovers', async () => {
    const deps: Partial<TrustGraphDeps> = {};
    const { graph, first } = await served(deps);
    // The graph reads its deps at each walk: this one starts with too small a heap to load.
    deps.resourceLimits = { maxOldGenerationSizeMb: 4 };
    const failed = await graph.refresh();
    assert.equal(failed.ok, false);
    assert.match(failed.error ?? '', /memory limit/);
    delete deps.resourceLimits;
    await recovers(graph, first);
  });

  it('fails a refresh whose worker is ended from outside, then recovers', async () => {
    const { graph, first } = await served();
    mode = 'silent';
    const running = graph.refresh();
    // The walk's worker, as a crash would end it (the graph keeps it private).
    const workerOf = () => (graph as unknown as { worker?: Worker }).worker;
    await waitFor('the walk to start', () => workerOf() !== undefined, 10_000);
    await workerOf()!.terminate();
    // Well before the walk's own deadline (timeoutSec 60).
    const failed = await within(running, 20_000, 'the refresh whose worker was ended');
    assert.equal(failed.ok, false);
    assert.match(failed.error ?? '', /exited/);
    await recovers(graph, first);
  });

  it('ends a worker stuck past its deadline, then recovers', async () => {
    const deps: Partial<TrustGraphDeps> = {};
    const { graph, first } = await served(deps);
    // A worker that never answers, given 300 ms past the walk's deadline (timeoutSec 60):
    // the overrun, counted from that deadline, is the only way this refresh can end.
    deps.workerUrl = new URL('../../helpers/stuck-worker.js', import.meta.url);
    deps.overrunMs = 300 - settings.timeoutSec * 1000;
    const failed = await within(graph.refresh(), 20_000, 'the refresh of a stuck worker');
    assert.equal(failed.ok, false);
    assert.match(failed.error ?? '', /past its deadline: ended/);
    delete deps.workerUrl;
    delete deps.overrunMs;
    await recovers(graph, first);
  });

  it('ends a running walk on stop(), leaving nothing to keep the process alive', async () => {
    mode = 'silent';
    // A process of its own that starts the graph on the silent relay, stops it and returns.
    const script = `
      import { TrustGraph } from ${JSON.stringify(new URL('../../../src/trust/trust-graph.js', import.meta.url).href)};
      const graph = new TrustGraph(${JSON.stringify(settings)}, {
        url: ${JSON.stringify(relay!.url)},
        swapped: () => undefined,
        report: (r) => console.log(JSON.stringify(r)),
      });
      graph.start();
      const deadline = Date.now() + 10_000;
      while (graph.worker === undefined && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      if (graph.worker === undefined) throw new Error('no walk started');
      graph.stop();
    `;
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    const code = await exited;
    clearTimeout(timer);
    assert.equal(code, 0, 'the process was kept alive after stop() (killed at 20 s)');
    const report = JSON.parse(out.trim().split('\n').at(-1)!) as RefreshReport;
    // The walk stop() ended (not one that failed by itself).
    assert.equal(report.ok, false);
    assert.equal(report.error, 'the walk was stopped');
  });
});
