/** Closed-loop HTTP load with autocannon: each connection sends its next write on the answer. */
import autocannon from 'autocannon';
import { clientOfHeaders } from './client-bodies.js';

export interface LoadCounts {
  requests: number;
  ok2xx: number;
  limited429: number;
  otherNon2xx: number;
  errors: number;
  timeouts: number;
  /** Status codes other than 2xx and 429, with their counts. */
  otherStatuses: Record<string, number>;
}

export interface LoadResult {
  wallSeconds: number;
  counts: LoadCounts;
  latencyMs: { p50: number; p90: number; p99: number; max: number; mean: number } | null;
  /** Nostr reads: what the answered REQs carried (see ws-read-load.ts). */
  reads?: { events: number; short: number };
}

export interface HttpLoadOptions {
  url: string;
  connections: number;
  durationSec: number;
  /** The body of the next request of a client (client-bodies.ts). */
  bodyFor: (client: string) => string;
  /** Headers naming the client of the next request (X-Forwarded-For, X-API-Key). */
  headersFor: () => Record<string, string>;
  onTick?: (elapsedSec: number) => void;
}

export async function runHttpLoad(opts: HttpLoadOptions): Promise<LoadResult> {
  const started = performance.now();
  const ticker = opts.onTick
    ? setInterval(() => opts.onTick!((performance.now() - started) / 1000), 500)
    : undefined;
  let r: autocannon.Result;
  try {
    r = await autocannon({
      url: opts.url,
      connections: opts.connections,
      duration: opts.durationSec,
      requests: [
        {
          method: 'POST',
          path: '/events',
          setupRequest: (req) => {
            const headers = opts.headersFor();
            return {
              ...req,
              headers: { 'content-type': 'application/json', ...headers },
              body: opts.bodyFor(clientOfHeaders(headers)),
            };
          },
        },
      ],
    });
  } finally {
    clearInterval(ticker);
  }
  // Our clock, not autocannon's throughput figure (which is bytes per second).
  const wallSeconds = (performance.now() - started) / 1000;
  const codes = r.statusCodeStats as unknown as Record<string, { count: number } | undefined>;
  const otherStatuses: Record<string, number> = {};
  for (const [code, stat] of Object.entries(codes)) {
    if (code !== '429' && !code.startsWith('2') && stat?.count) otherStatuses[code] = stat.count;
  }
  const limited429 = codes['429']?.count ?? 0;
  const requests = r['2xx'] + r.non2xx;
  return {
    wallSeconds,
    counts: {
      requests,
      ok2xx: r['2xx'],
      limited429,
      otherNon2xx: r.non2xx - limited429,
      errors: r.errors,
      timeouts: r.timeouts,
      otherStatuses,
    },
    latencyMs: requests
      ? {
          p50: r.latency.p50,
          p90: r.latency.p90,
          p99: r.latency.p99,
          max: r.latency.max,
          mean: r.latency.mean,
        }
      : null,
  };
}
