/**
 * Subscribers of the pressure channel beside the gateway processes, for the scaled-down run:
 * in a process of their own (forked), each a real PressureFollower with its own subscribed
 * connection to the cluster, recording how long each report took from its publication
 * (the report's ts) to being applied on that follower's board.
 *
 * Parent -> child: { count, seed }. Child -> parent: { ready: true } once every follower is
 * subscribed; on { report: true } it answers { latenciesMs } and exits.
 */
import { fork } from 'node:child_process';
import type { FastifyBaseLogger } from 'fastify';
import { GatewayConfigSchema } from '../../config/schema.js';
import { MultiplierBoard } from '../../pressure/follower/board.js';
import { PressureFollower } from '../../pressure/follower/follower.js';
import { createStore } from '../../store/index.js';
import { DEFAULT_CLIENT } from '../../store/options.js';
import type { NodeAddress, Store } from '../../store/index.js';
import { FLEET_NODE } from './fleet-config.js';

interface Start {
  count: number;
  seed: NodeAddress;
}

const QUIET = { debug: () => undefined } as unknown as FastifyBaseLogger;

/** Start `count` followers in a forked process; resolves once all are subscribed. */
export async function startSubscribers(
  count: number,
  seed: NodeAddress,
  timeoutMs = 60_000,
): Promise<{ collect(): Promise<number[]>; stop(): void }> {
  const child = fork(new URL(import.meta.url), ['--fleet-subscribers'], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${count} subscribers not ready within ${timeoutMs} ms`));
    }, timeoutMs);
    child.once('message', (m: { ready?: boolean; error?: string }) => {
      clearTimeout(timer);
      if (m.ready) resolve();
      else reject(new Error(`subscribers: ${m.error ?? 'failed'}`));
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`the subscriber process exited with ${code} before it was ready`));
    });
    child.send({ count, seed } satisfies Start);
  });
  return {
    async collect() {
      const answer = new Promise<number[]>((resolve) =>
        child.once('message', (m: { latenciesMs: number[] }) => resolve(m.latenciesMs)),
      );
      child.send({ report: true });
      const latencies = await answer;
      await exited;
      return latencies;
    },
    stop: () => void child.kill('SIGKILL'),
  };
}

async function runChild(start: Start): Promise<void> {
  const settings = GatewayConfigSchema.parse({
    admin: { token: 'a-fleet-subscriber-token-0123456789' },
    upstreams: [{ id: FLEET_NODE, url: 'http://127.0.0.1:1' }],
    pressure: { enabled: true },
  }).pressure;
  const store: Store = await createStore({
    client: DEFAULT_CLIENT,
    mode: 'cluster',
    nodes: [start.seed],
  });
  const latencies: number[] = [];
  const followers: PressureFollower[] = [];
  for (let i = 0; i < start.count; i++) {
    const follower = new PressureFollower(
      settings,
      new MultiplierBoard([FLEET_NODE]),
      store,
      QUIET,
      (seconds) => latencies.push(seconds * 1000),
    );
    await follower.start();
    followers.push(follower);
  }
  process.send!({ ready: true });
  process.on('message', (m: { report?: boolean }) => {
    if (!m.report) return;
    process.send!({ latenciesMs: latencies }, () => {
      void Promise.all(followers.map((f) => f.stop()))
        .then(() => store.close())
        .finally(() => process.exit(0));
    });
  });
}

if (process.argv.includes('--fleet-subscribers') && process.send) {
  process.once('message', (m: Start) => {
    runChild(m).catch((err: unknown) => {
      process.send!({ error: err instanceof Error ? err.message : String(err) });
      process.exit(1);
    });
  });
}
