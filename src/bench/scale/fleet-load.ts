/**
 * The scaled-down real run's clients: open-loop HTTP writes (request i due at t0 + i/rate)
 * through every gateway process, identities drawn by Zipf from a population that never has
 * to exist (a rank is an address), each sticking to one gateway, and a hot key written
 * through every gateway in turn. Tallies every answer: what each client was admitted, and
 * anything that was neither admitted nor a rate limit.
 */
import { clientBodies } from '../run/client-bodies.js';
import http from 'node:http';
import { seededRandom } from '../../util/random.js';
import { HOT_ADDRESS, identityAddress } from './fleet-config.js';
import type { FleetRunConfig } from './fleet-config.js';
import { gatewayOf, zipfRank } from './traffic.js';

const REQUEST_TIMEOUT_MS = 10_000;
/** How long answers still in flight are awaited after the window. */
const GRACE_MS = 5000;

export interface FleetLoadTally {
  offered: number;
  /** Due while the gateway's every slot was busy: never sent. */
  unsent: number;
  admitted: number;
  limited: number;
  /** Answers other than 2xx and 429, by status, and requests that failed outright. */
  otherStatuses: Record<string, number>;
  errors: Record<string, number>;
  /** Requests sent again once: their reused keep-alive socket had been closed by the gateway. */
  idleResetsRetried: number;
  /** The first failures: when (ms into the run), through which gateway, what. */
  firstFailures: { atMs: number; gateway: number; what: string; reused?: boolean }[];
  /** Writes admitted per client address (only clients that got one). */
  admittedBy: Map<string, number>;
  /** When (ms into the run) each of the hot key's writes was admitted. */
  hotAdmittedAtMs: number[];
  latencyMs: { p50: number; p99: number; p999: number; max: number };
}

export interface FleetLoadHandle {
  /** Resolves with the tally once the window is over and the last answers are in. */
  done: Promise<FleetLoadTally>;
  /** ms since the load started. */
  elapsedMs(): number;
}

/** Start the load against `gatewayUrls` (one per gateway process) for cfg.durationSec. */
export function startFleetLoad(
  cfg: FleetRunConfig,
  gatewayUrls: readonly string[],
  bodies: readonly string[],
): FleetLoadHandle {
  // A timeout makes the agent honour the gateway's Keep-Alive hint (closing idle sockets a
  // second before the gateway does); without one Node keeps them forever (nodejs/node#47130).
  const agents = gatewayUrls.map(
    () =>
      new http.Agent({
        keepAlive: true,
        maxSockets: cfg.maxInFlightPerGateway,
        timeout: REQUEST_TIMEOUT_MS,
      }),
  );
  const targets = gatewayUrls.map((u) => new URL('/events', u));
  const inFlight = new Int32Array(gatewayUrls.length);
  const random = seededRandom(cfg.seed);
  const tally: Omit<FleetLoadTally, 'latencyMs'> = {
    offered: 0,
    unsent: 0,
    admitted: 0,
    limited: 0,
    otherStatuses: {},
    errors: {},
    idleResetsRetried: 0,
    firstFailures: [],
    admittedBy: new Map(),
    hotAdmittedAtMs: [],
  };
  const latencies: number[] = [];
  // No address of a default run sends more events than the pool holds (see clientBodies).
  const bodyFor = clientBodies(bodies);
  let open = 0;
  let hotTurn = 0;
  const t0 = performance.now();
  const windowMs = cfg.durationSec * 1000;
  const intervalMs = 1000 / cfg.writesPerSec;

  const failed = (gateway: number, what: string, reused?: boolean) => {
    if (tally.firstFailures.length < 20) {
      const atMs = Math.round(performance.now() - t0);
      tally.firstFailures.push({ atMs, gateway, what, ...(reused ? { reused } : {}) });
    }
  };

  const send = (intended: number) => {
    tally.offered++;
    let gateway: number;
    let address: string;
    if (random() < cfg.hotShare) {
      gateway = hotTurn++ % gatewayUrls.length;
      address = HOT_ADDRESS;
    } else {
      const id = zipfRank(random(), cfg.identities, cfg.zipf) - 1;
      gateway = gatewayOf(id, gatewayUrls.length);
      address = identityAddress(id);
    }
    if (inFlight[gateway]! >= cfg.maxInFlightPerGateway) {
      tally.unsent++;
      return;
    }
    inFlight[gateway]!++;
    open++;
    post(gateway, address, bodyFor(address), intended, false);
  };

  const post = (
    gateway: number,
    address: string,
    body: string,
    intended: number,
    retry: boolean,
  ) => {
    const settle = () => {
      inFlight[gateway]!--;
      open--;
    };
    const req = http.request(
      targets[gateway]!,
      {
        method: 'POST',
        agent: agents[gateway],
        headers: { 'content-type': 'application/json', 'x-forwarded-for': address },
        timeout: REQUEST_TIMEOUT_MS,
      },
      (res) => {
        res.resume();
        res.on('end', () => {
          settle();
          const now = performance.now();
          latencies.push(now - intended);
          const code = res.statusCode ?? 0;
          if (code >= 200 && code < 300) {
            tally.admitted++;
            tally.admittedBy.set(address, (tally.admittedBy.get(address) ?? 0) + 1);
            if (address === HOT_ADDRESS) tally.hotAdmittedAtMs.push(now - t0);
          } else if (code === 429) tally.limited++;
          else {
            tally.otherStatuses[code] = (tally.otherStatuses[code] ?? 0) + 1;
            failed(gateway, `status ${code}`);
          }
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (err: NodeJS.ErrnoException) => {
      // An idle keep-alive socket the gateway closed as it was reused: the request never
      // reached it, and a client sends it again (as Node's documentation advises).
      if (req.reusedSocket && err.code === 'ECONNRESET' && !retry) {
        tally.idleResetsRetried++;
        post(gateway, address, body, intended, true);
        return;
      }
      settle();
      const kind = err.code ?? err.message;
      tally.errors[kind] = (tally.errors[kind] ?? 0) + 1;
      failed(gateway, kind, req.reusedSocket);
    });
    req.end(body);
  };

  const done = new Promise<FleetLoadTally>((resolve) => {
    let next = 0;
    const timer = setInterval(() => {
      const now = performance.now();
      const elapsed = now - t0;
      const dueUntil = Math.min(elapsed, windowMs);
      while (next * intervalMs <= dueUntil) {
        send(t0 + next * intervalMs);
        next++;
      }
      if (elapsed < windowMs) return;
      clearInterval(timer);
      const deadline = now + GRACE_MS;
      const wait = setInterval(() => {
        if (open > 0 && performance.now() < deadline) return;
        clearInterval(wait);
        for (const agent of agents) agent.destroy();
        const sorted = Float64Array.from(latencies).sort();
        const at = (q: number) =>
          sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
        resolve({
          ...tally,
          latencyMs: { p50: at(0.5), p99: at(0.99), p999: at(0.999), max: at(1) },
        });
      }, 20);
    }, 2);
  });
  return { done, elapsedMs: () => performance.now() - t0 };
}
