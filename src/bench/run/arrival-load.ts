/**
 * Open-loop HTTP load (wrk2's model): request i is due at t0 + i/rate whatever the server
 * does, and its latency runs from that intended time. A closed loop (autocannon) stops
 * sending while the server stalls, so the stall never shows in its latency (coordinated
 * omission); here a stall queues the requests due meanwhile, and their wait is measured.
 */
import http from 'node:http';
import { percentiles } from '../ws-load.js';
import { clientOfHeaders } from './client-bodies.js';
import type { HttpLoadOptions, LoadResult } from './http-load.js';

/** The closed loop's options, `connections` bounding the requests in flight, and a rate. */
export interface ArrivalLoadOptions extends HttpLoadOptions {
  /** Offered requests per second. */
  rate: number;
}

export interface ArrivalLoadResult extends LoadResult {
  load: {
    mode: 'arrival';
    offeredRate: number;
    /** Answers per second of the window. */
    achievedRate: number;
    /** Requests sent more than 1 ms after their intended time (they waited for a slot). */
    late: number;
    /** Requests due in the window but never sent: every slot was busy to the end. */
    unsent: number;
  };
}

/** How long answers still in flight are awaited after the window. */
const GRACE_MS = 2000;
const REQUEST_TIMEOUT_MS = 10_000;

export async function runArrivalLoad(opts: ArrivalLoadOptions): Promise<ArrivalLoadResult> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: opts.connections });
  const target = new URL('/events', opts.url);
  const intervalMs = 1000 / opts.rate;
  const windowMs = opts.durationSec * 1000;
  const latencies: number[] = [];
  const statuses = new Map<number, number>();
  let errors = 0;
  let timeouts = 0;
  let late = 0;
  let inFlight = 0;
  let next = 0;
  const t0 = performance.now();
  const windowEnd = t0 + windowMs;

  const send = (intended: number) => {
    inFlight++;
    const headers = opts.headersFor();
    const req = http.request(
      target,
      {
        method: 'POST',
        agent,
        headers: { 'content-type': 'application/json', ...headers },
        timeout: REQUEST_TIMEOUT_MS,
      },
      (res) => {
        res.resume();
        res.on('end', () => {
          inFlight--;
          latencies.push(performance.now() - intended);
          const code = res.statusCode ?? 0;
          statuses.set(code, (statuses.get(code) ?? 0) + 1);
          pump();
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (err) => {
      inFlight--;
      if (err.message === 'timeout') timeouts++;
      else errors++;
      pump();
    });
    req.end(opts.bodyFor(clientOfHeaders(headers)));
  };

  // Send every request that is due, while a slot is free; the rest wait for a slot.
  const pump = () => {
    const now = performance.now();
    while (inFlight < opts.connections) {
      const intended = t0 + next * intervalMs;
      if (intended > now || intended >= windowEnd) return;
      if (now - intended > 1) late++;
      next++;
      send(intended);
    }
  };

  let ticks = 0;
  await new Promise<void>((resolve) => {
    const timer = setInterval(() => {
      pump();
      const elapsed = performance.now() - t0;
      if (opts.onTick && Math.floor(elapsed / 500) > ticks) {
        ticks = Math.floor(elapsed / 500);
        opts.onTick(elapsed / 1000);
      }
      if (elapsed >= windowMs) {
        clearInterval(timer);
        resolve();
      }
    }, 1);
  });
  const due = Math.ceil(windowMs / intervalMs);
  const unsent = Math.max(0, due - next);
  const graceEnd = performance.now() + GRACE_MS;
  while (inFlight > 0 && performance.now() < graceEnd) {
    await new Promise((r) => setTimeout(r, 5));
  }
  timeouts += inFlight;
  agent.destroy();

  const wallSeconds = opts.durationSec;
  let ok2xx = 0;
  let limited429 = 0;
  const otherStatuses: Record<string, number> = {};
  for (const [code, count] of statuses) {
    if (code >= 200 && code < 300) ok2xx += count;
    else if (code === 429) limited429 += count;
    else otherStatuses[String(code)] = count;
  }
  const requests = latencies.length;
  const summary = percentiles(latencies);
  const round = (x: number) => Number(x.toFixed(3));
  return {
    wallSeconds,
    counts: {
      requests,
      ok2xx,
      limited429,
      otherNon2xx: requests - ok2xx - limited429,
      errors: errors + timeouts,
      timeouts,
      otherStatuses,
    },
    latencyMs: summary && {
      p50: round(summary.p50),
      p90: round(summary.p90),
      p99: round(summary.p99),
      max: round(summary.max),
      mean: round(summary.mean),
    },
    load: {
      mode: 'arrival',
      offeredRate: opts.rate,
      achievedRate: requests / wallSeconds,
      late,
      unsent,
    },
  };
}
