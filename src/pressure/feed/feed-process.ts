import http from 'node:http';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { createStore, parseNodeAddress } from '../../store/index.js';
import type { ClientKind, Topology } from '../../store/index.js';
import { PressureFeed, relayBacklog } from './feed.js';
import { LAWS } from '../laws/registry.js';
import type { LawName } from '../laws/registry.js';
import type { LawParams } from '../laws/law-params.js';
import { cgroupSampler, processSampler, prometheusSampler } from './samplers.js';
import type { Sampler } from './samplers.js';
import { DEFAULT_FAST_TICK_MS } from './tick-pace.js';
import { DrainEstimator } from '../budget/estimator.js';
import { readyLine } from '../../util/ready-line.js';

export interface FeedProcessOptions {
  nodeId: string;
  pid?: number;
  cgroup?: string;
  prometheus?: string;
  metric: string;
  relay?: string;
  /** The memory to stay under; or targetFraction of the --cgroup's limit (exactly one). */
  targetBytes?: number;
  targetFraction?: number;
  tickMs: number;
  /** The tick under pressure (default: 50 ms, or tickMs when that is shorter). */
  fastTickMs?: number;
  fastAbove: number;
  law: LawName;
  acceptableBacklog?: number;
  baseRate?: number;
  /** Learn the node's write budget (default on; --no-learn-budget). */
  learnBudget?: boolean;
  /** Drop the estimate a previous feed of this node saved (--forget-budget). */
  forgetBudget?: boolean;
  /** The reference relay's /stats for its drain (learning only; --relay gives it). */
  drainStats?: string;
  budgetFlat?: number;
  budgetMin?: number;
  valkeyClient: ClientKind;
  valkeyMode: Topology;
  valkeyNodes: string;
  host: string;
  port: number;
}

function samplerFor(o: FeedProcessOptions): Sampler {
  if (o.pid !== undefined) return processSampler(o.pid);
  if (o.cgroup) return cgroupSampler(o.cgroup);
  if (o.relay)
    return prometheusSampler(`${o.relay.replace(/\/$/, '')}/metrics`, 'relay_rss_anon_bytes');
  return prometheusSampler(o.prometheus!, o.metric);
}

/**
 * The target in bytes: --target-bytes, or --target-fraction of the cgroup's limit as the
 * first sample reads it (fixed from then on). Exactly one of the two.
 */
export async function resolveTarget(
  o: Pick<FeedProcessOptions, 'targetBytes' | 'targetFraction' | 'cgroup'>,
  sampler: Sampler,
): Promise<number> {
  if ((o.targetBytes === undefined) === (o.targetFraction === undefined)) {
    throw new Error('give exactly one of --target-bytes and --target-fraction');
  }
  if (o.targetBytes !== undefined) return o.targetBytes;
  const fraction = o.targetFraction!;
  if (!(fraction > 0 && fraction <= 1)) {
    throw new Error(`--target-fraction ${fraction} is not in (0, 1]`);
  }
  if (!o.cgroup) {
    throw new Error(
      '--target-fraction needs --cgroup (a fraction of its limit); else give --target-bytes',
    );
  }
  const limit = (await sampler.sample()).detail.limit;
  if (limit === undefined || !Number.isFinite(limit)) {
    throw new Error(
      `cgroup ${o.cgroup} has no memory limit, so --target-fraction has nothing to scale: ` +
        'set one (memory.max on v2, memory.limit_in_bytes on v1) or give --target-bytes',
    );
  }
  return Math.floor(fraction * limit);
}

/**
 * `sluice feed`: wire sampler, law, Valkey and a /metrics listener, print the ready line;
 * resolves with what stops it all.
 */
export async function runFeed(o: FeedProcessOptions): Promise<() => Promise<void>> {
  if ((o.acceptableBacklog === undefined) !== (o.baseRate === undefined)) {
    throw new Error(
      'give --acceptable-backlog and --base-rate together (the backlog term needs both)',
    );
  }
  const backlogParams =
    o.acceptableBacklog === undefined
      ? {}
      : { acceptableBacklogBytes: o.acceptableBacklog, baseBytesPerSec: o.baseRate };
  // Runtime overrides from the admin endpoint win over the flags.
  const makeLaw = (overrides: LawParams) => LAWS[o.law].make({ ...backlogParams, ...overrides });
  if (o.fastTickMs !== undefined && o.fastTickMs > o.tickMs) {
    throw new Error(
      `--fast-tick-ms ${o.fastTickMs} is longer than --tick-ms ${o.tickMs}: the fast tick must not be slower (equal turns it off)`,
    );
  }
  const sampler = samplerFor(o);
  const targetBytes = await resolveTarget(o, sampler);
  const log = pino({ base: { service: 'sluice-feed', node: o.nodeId } }, pino.destination(2));
  if (o.targetFraction !== undefined) {
    log.info({ targetBytes, fraction: o.targetFraction }, 'target from the cgroup limit');
  }
  const store = await createStore({
    client: o.valkeyClient,
    mode: o.valkeyMode,
    nodes: o.valkeyNodes.split(',').map((n) => parseNodeAddress(n)),
    clientName: 'sluice-feed',
  });
  const feed = new PressureFeed({
    nodeId: o.nodeId,
    sampler,
    backlog: o.relay ? relayBacklog(`${o.relay.replace(/\/$/, '')}/stats`) : undefined,
    targetBytes,
    tickMs: o.tickMs,
    fastTickMs: o.fastTickMs ?? Math.min(DEFAULT_FAST_TICK_MS, o.tickMs),
    fastAbove: o.fastAbove,
    law: makeLaw({}),
    makeLaw,
    kv: store.kv,
    log,
    ...(o.learnBudget === false
      ? {}
      : {
          learn: {
            admitted: store.admitted,
            forget: o.forgetBudget === true,
            estimator: new DrainEstimator({
              ceilingBytes: targetBytes,
              ...(o.budgetFlat !== undefined ? { flatBytesPerSec: o.budgetFlat } : {}),
              ...(o.budgetMin !== undefined ? { minBytesPerSec: o.budgetMin } : {}),
            }),
            ...(o.drainStats
              ? { drain: relayBacklog(`${o.drainStats.replace(/\/(stats)?$/, '')}/stats`) }
              : {}),
          },
        }),
  });
  try {
    await feed.start();
  } catch (err) {
    await store.close();
    throw err;
  }
  const server = http.createServer((req, res) => {
    if (req.url === '/metrics') {
      void feed.registry.metrics().then((text) => {
        res.setHeader('content-type', feed.registry.contentType);
        res.end(text);
      });
    } else if (req.url === '/healthz') {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ status: 'ok', last: feed.last ?? null }));
    } else {
      res.statusCode = 404;
      res.end();
    }
  });
  await new Promise<void>((resolve) => server.listen(o.port, o.host, resolve));
  const { port } = server.address() as AddressInfo;
  const close = async () => {
    feed.stop();
    server.close();
    await store.close();
  };
  // Last: whoever reads this line may signal at once (the caller handles signals first).
  console.log(
    readyLine({ ready: 'feed', url: `http://${o.host}:${port}`, node: o.nodeId, law: o.law }),
  );
  return close;
}
