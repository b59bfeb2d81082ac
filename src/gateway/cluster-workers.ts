/**
 * The workers of a multi-worker gateway, seen from the primary: one per slot, forked, replaced
 * when they die (backing off when they die young), handed client sockets by slot, and stopped.
 * A replacement takes its predecessor's slot, so the addresses that moved while the slot was
 * empty come back to it (sticky-dispatch.ts).
 */
import cluster from 'node:cluster';
import type { Worker } from 'node:cluster';
import type { FastifyBaseLogger } from 'fastify';
import { isMessage } from './cluster-messages.js';
import type { ToPrimary, ToWorker } from './cluster-messages.js';
import { slotFor } from './sticky-dispatch.js';
import type { Handover } from './sticky-dispatch.js';

/** A worker that dies sooner than this after its start counts as failing to start. */
const QUICK_DEATH_MS = 10_000;
const MAX_RESTART_DELAY_MS = 10_000;

export class ClusterWorkers {
  /** Workers that said they are ready, by slot: the ones sockets are handed to. */
  private readonly ready = new Map<number, Worker>();
  private stopping = false;
  private quickDeaths = 0;

  constructor(
    private readonly count: number,
    private readonly log: FastifyBaseLogger,
    private readonly onMessage: (message: unknown) => void,
  ) {}

  /** Every worker process alive, ready or not. */
  live(): Worker[] {
    return Object.values(cluster.workers ?? {}).filter((w): w is Worker => !!w);
  }

  /** Fork one worker per slot; resolves once all are ready, rejects if one dies first. */
  async start(): Promise<void> {
    await Promise.all(Array.from({ length: this.count }, (_, slot) => this.fork(slot)));
  }

  /** Give a client's socket to the worker its address hashes to; false when none is ready. */
  handOver(key: string, { socket, head }: Handover): boolean {
    const slot = slotFor(key, [...this.ready.keys()]);
    const worker = slot === undefined ? undefined : this.ready.get(slot);
    if (!worker) return false;
    const message: ToWorker = head
      ? { type: 'sluice:connection', head: head.toString('base64') }
      : { type: 'sluice:connection' };
    worker.send(message, socket, (err: Error | null) => {
      if (err) socket.destroy();
    });
    return true;
  }

  send(message: ToWorker): void {
    for (const w of this.live()) w.send(message);
  }

  /** SIGTERM every worker (SIGKILL after `graceMs`), resolved once all have exited. */
  async stop(graceMs: number): Promise<void> {
    this.stopping = true;
    const workers = this.live();
    const exited = workers.map(
      (w) =>
        new Promise<void>((resolve) =>
          w.process.exitCode !== null ? resolve() : w.once('exit', () => resolve()),
        ),
    );
    for (const w of workers) w.process.kill('SIGTERM');
    const force = setTimeout(() => {
      for (const w of workers) if (w.process.exitCode === null) w.process.kill('SIGKILL');
    }, graceMs);
    await Promise.all(exited);
    clearTimeout(force);
  }

  /** Stop at once, after a failed start. */
  kill(): void {
    this.stopping = true;
    for (const w of this.live()) w.process.kill('SIGKILL');
  }

  /** Fork the worker of `slot`; resolves once it is ready, rejects if it dies first. */
  private fork(slot: number): Promise<void> {
    const worker = cluster.fork();
    const startedAt = Date.now();
    worker.on('message', this.onMessage);
    // A worker whose channel is gone can take no socket: its slot is empty until it is replaced.
    worker.once('disconnect', () => {
      if (this.ready.get(slot) === worker) this.ready.delete(slot);
    });
    worker.once('exit', (code, signal) => {
      if (this.ready.get(slot) === worker) this.ready.delete(slot);
      this.restart(slot, startedAt, { pid: worker.process.pid, code, signal });
    });
    return new Promise<void>((resolve, reject) => {
      worker.on('message', (m: unknown) => {
        if (!isMessage<Extract<ToPrimary, { type: 'sluice:ready' }>>(m, 'sluice:ready')) return;
        this.ready.set(slot, worker);
        resolve();
      });
      worker.once('exit', (code, signal) =>
        reject(
          new Error(
            `worker ${worker.process.pid} ${signal ?? `exited with ${code}`} before it was ready`,
          ),
        ),
      );
    });
  }

  /** A worker died: start another in its slot, later the more often workers die young. */
  private restart(slot: number, startedAt: number, death: Record<string, unknown>): void {
    if (this.stopping) return;
    const quick = Date.now() - startedAt < QUICK_DEATH_MS;
    this.quickDeaths = quick ? this.quickDeaths + 1 : 0;
    const delay = quick ? Math.min(MAX_RESTART_DELAY_MS, 250 * 2 ** this.quickDeaths) : 0;
    this.log.error({ ...death, restartInMs: delay }, 'gateway worker died; starting another');
    setTimeout(() => {
      if (this.stopping) return;
      this.fork(slot).catch((err: Error) =>
        this.log.error({ err: err.message }, 'worker restart failed'),
      );
    }, delay).unref();
  }
}
