/**
 * NIP-11 through the gateway: a GET with `Accept: application/nostr+json` is answered with
 * the relay's information document, fetched through the node's upstream pool (bounded in
 * bytes and time, cached a few seconds per relay node and path, whatever the query; at most
 * RELAY_INFO_MAX_FETCHES at once; cancelled once every client waiting for it has gone) and
 * merged with the gateway's own limits.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { Lru } from '../util/lru.js';
import type { Dispatcher } from 'undici';
import type { Problem } from '../quota/responses.js';
import type { GatewayContext } from './context.js';
import { requiredDifficulty } from '../nostr/adaptive-work.js';
import { mergeRelayInfo } from '../nostr/relay-info-document.js';
import type { GatewayLimits } from '../nostr/relay-info-document.js';
import type { ForwardRoute } from './http-forward.js';

/** The largest relay document read; past it the fetch is abandoned (502). */
export const RELAY_INFO_MAX_BYTES = 64 * 1024;
/** How long the relay may take for the whole document (capped by limits.upstreamTimeoutMs). */
export const RELAY_INFO_TIMEOUT_MS = 5000;
/** How long a fetched document (or a failure) is reused for the same node and path. */
export const RELAY_INFO_CACHE_MS = 5000;
/** How long a failure to fetch is remembered. */
const FAILURE_CACHE_MS = 1000;
/** Documents held: paths are the client's choice, so the cache is bounded. */
const CACHE_ENTRIES = 256;
/**
 * Fetches in flight at once, over all nodes and paths: each costs a request to a relay that
 * the client does not pay for, so past this a NIP-11 request is answered 503 (retry in 1 s).
 */
export const RELAY_INFO_MAX_FETCHES = 8;

/** CORS headers a browser client needs; the relay's own take their place when it sends them. */
const DEFAULT_CORS: Record<string, string> = {
  'access-control-allow-origin': '*',
  'access-control-allow-headers': '*',
  'access-control-allow-methods': 'GET, OPTIONS',
};

export function wantsRelayInfo(method: string, headers: IncomingHttpHeaders): boolean {
  const accept = headers.accept;
  return (
    method === 'GET' && typeof accept === 'string' && accept.includes('application/nostr+json')
  );
}

/** A relay's document and its CORS headers, or why it could not be had. */
export type Fetched =
  | { ok: true; doc: Record<string, unknown>; cors: Record<string, string> }
  | { ok: false; reason: string; busy?: boolean; gone?: boolean };

/** Fetches `url`'s document; gives up (a failure) once `cancel` aborts. */
export type RelayInfoFetcher = (url: string, cancel: AbortSignal) => Promise<Fetched>;

class RelayInfoFailure extends Error {}

/** One fetch, shared by the clients waiting for it. */
interface Shared {
  readonly result: Promise<Fetched>;
  readonly cancel: AbortController;
  /** Clients still waiting for it: the last to leave before it ends cancels it. */
  waiters: number;
  settled: boolean;
}

const GONE: Fetched = { ok: false, gone: true, reason: 'the client went away' };

/**
 * Fetches per relay node and path, shared while in flight and reused while fresh. A fetch
 * nobody waits for any more (every client that asked has gone) is cancelled, so a client that
 * asks and leaves costs the relay a request cut short, not one served.
 */
export class RelayInfoSource {
  private readonly cache = new Lru<string, Shared>({
    max: CACHE_ENTRIES,
    ttl: RELAY_INFO_CACHE_MS,
  });

  private inFlight = 0;

  constructor(private readonly fetcher: RelayInfoFetcher) {}

  /**
   * `url` without its query: the document is the relay's, whatever a client appends.
   * `client` aborts when the asking client goes; it is then answered GONE at once.
   */
  get(url: string, client: AbortSignal): Promise<Fetched> {
    if (client.aborted) return Promise.resolve(GONE);
    let shared = this.cache.get(url);
    if (!shared) {
      if (this.inFlight >= RELAY_INFO_MAX_FETCHES) {
        return Promise.resolve({ ok: false, busy: true, reason: 'too many fetches in flight' });
      }
      shared = this.start(url);
    }
    return shared.settled ? shared.result : this.wait(url, shared, client);
  }

  private start(url: string): Shared {
    this.inFlight++;
    const cancel = new AbortController();
    const result = this.fetcher(url, cancel.signal);
    const shared: Shared = { result, cancel, waiters: 0, settled: false };
    this.cache.set(url, shared);
    void result.then((fetched) => {
      shared.settled = true;
      this.inFlight--;
      // A failure is remembered for a second only: long enough to spare a struggling relay
      // a flood of fetches, short enough not to outlast a restart.
      if (!fetched.ok && this.cache.peek(url) === shared) {
        this.cache.set(url, shared, { ttl: FAILURE_CACHE_MS });
      }
    });
    return shared;
  }

  private wait(url: string, shared: Shared, client: AbortSignal): Promise<Fetched> {
    shared.waiters++;
    return new Promise((resolve) => {
      const leave = () => {
        shared.waiters--;
        if (shared.waiters === 0 && !shared.settled) {
          // Forgotten first: whoever asks next starts a fetch of their own.
          if (this.cache.peek(url) === shared) this.cache.delete(url);
          shared.cancel.abort();
        }
        resolve(GONE);
      };
      client.addEventListener('abort', leave, { once: true });
      void shared.result.then((fetched) => {
        if (client.aborted) return;
        client.removeEventListener('abort', leave);
        shared.waiters--;
        resolve(fetched);
      });
    });
  }
}

/**
 * Fetches through `dispatcher`, the undici pool the gateway proxies HTTP to its relay nodes
 * with: a document costs a request on the node's pooled connections, not a connection of its
 * own. Bounded in bytes and in time (the whole document within `timeoutMs`).
 */
export function relayInfoFetcher(dispatcher: Dispatcher, timeoutMs: number): RelayInfoFetcher {
  return (url, cancel) => fetchRelayInfo(dispatcher, url, timeoutMs, cancel);
}

async function fetchRelayInfo(
  dispatcher: Dispatcher,
  url: string,
  timeoutMs: number,
  cancel: AbortSignal,
): Promise<Fetched> {
  // One signal for the request: aborted by the deadline or by the last waiter leaving.
  const abort = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    abort.abort();
  }, timeoutMs);
  const onCancel = () => abort.abort();
  cancel.addEventListener('abort', onCancel, { once: true });
  try {
    const { origin, pathname, search } = new URL(url);
    const res = await dispatcher.request({
      origin,
      path: pathname + search,
      method: 'GET',
      headers: { accept: 'application/nostr+json' },
      signal: abort.signal,
    });
    if (res.statusCode < 200 || res.statusCode > 299) {
      abandon(res.body);
      throw new RelayInfoFailure(`the relay answered ${res.statusCode}`);
    }
    const text = await boundedText(res, RELAY_INFO_MAX_BYTES);
    let doc: unknown;
    try {
      doc = JSON.parse(text);
    } catch {
      throw new RelayInfoFailure('the relay sent a document that is not JSON');
    }
    if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) {
      throw new RelayInfoFailure('the relay sent a document that is not a JSON object');
    }
    const cors: Record<string, string> = {};
    for (const [name, value] of Object.entries(res.headers)) {
      if (name.startsWith('access-control-') && value !== undefined) {
        cors[name] = Array.isArray(value) ? value.join(', ') : value;
      }
    }
    return { ok: true, doc: doc as Record<string, unknown>, cors };
  } catch (err) {
    if (err instanceof RelayInfoFailure) return { ok: false, reason: err.message };
    if (timedOut) return { ok: false, reason: `the relay did not answer within ${timeoutMs} ms` };
    if (cancel.aborted) return GONE;
    return { ok: false, reason: 'the relay could not be reached' };
  } finally {
    clearTimeout(timer);
    cancel.removeEventListener('abort', onCancel);
  }
}

/**
 * Drop a body unread (its connection goes with it). undici's body emits an abort error when
 * destroyed; nothing else listens then, and unheard it would be an uncaught exception.
 */
function abandon(body: Dispatcher.ResponseData['body']): void {
  body.on('error', () => undefined);
  body.destroy();
}

/** The body as text, abandoned (its connection dropped) past `max` bytes. */
async function boundedText(res: Dispatcher.ResponseData, max: number): Promise<string> {
  const declared = Number(res.headers['content-length'] ?? 0);
  if (declared > max) {
    abandon(res.body);
    throw new RelayInfoFailure(`the relay's document exceeds ${max} bytes`);
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of res.body) {
    size += (chunk as Buffer).byteLength;
    if (size > max) {
      abandon(res.body);
      throw new RelayInfoFailure(`the relay's document exceeds ${max} bytes`);
    }
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

export type RelayInfoAnswer =
  | { status: 200; headers: Record<string, string>; body: string }
  | { status: 502 | 503; headers: Record<string, string>; problem: Problem };

/** The default tier's write quota and the node's budget in force on `nodeId` now. */
function currentQuotas(
  ctx: GatewayContext,
  nodeId: string,
): Pick<GatewayLimits, 'writeQuota' | 'nodeBudget'> {
  const out: Pick<GatewayLimits, 'writeQuota' | 'nodeBudget'> = {};
  const quota = ctx.decider.effectiveLimit(ctx.policy.defaultTier, 'write', nodeId);
  if (quota) {
    out.writeQuota = {
      points: quota.points,
      windowSec: quota.base.windowSec,
      basePoints: quota.base.points,
      multiplier: quota.multiplier,
    };
  }
  const budget = ctx.decider.nodeBudgetNow(nodeId);
  if (budget) out.nodeBudget = budget;
  return out;
}

/**
 * The merged document for an admitted NIP-11 request, or a 502 naming what failed; undefined
 * once `client` has aborted (the client went away: nobody to answer).
 */
export async function relayInfoAnswer(
  ctx: GatewayContext,
  source: RelayInfoSource,
  route: ForwardRoute,
  client: AbortSignal,
): Promise<RelayInfoAnswer | undefined> {
  const fetched = await source.get(route.node.url + route.target.forward.split('?')[0]!, client);
  if (!fetched.ok && fetched.gone) return undefined;
  if (!fetched.ok && fetched.busy) {
    return {
      status: 503,
      headers: { ...DEFAULT_CORS, 'retry-after': '1' },
      problem: {
        type: 'urn:sluice:problem:busy',
        title: 'Service Unavailable',
        status: 503,
        detail: 'too many relay information documents are being fetched; retry in 1 s',
      },
    };
  }
  if (!fetched.ok) {
    return {
      status: 502,
      headers: DEFAULT_CORS,
      problem: {
        type: 'urn:sluice:problem:bad-gateway',
        title: 'Bad Gateway',
        status: 502,
        detail: `relay node ${route.node.id}'s information document (NIP-11) could not be had: ${fetched.reason}`,
      },
    };
  }
  const { config } = ctx;
  // Merged at answer time, after the cache: the quotas shown follow the node's multiplier now.
  const doc = mergeRelayInfo(fetched.doc, {
    maxFrameBytes: config.limits.maxFrameBytes,
    nostr: config.nostr,
    powInForce: requiredDifficulty(
      ctx.board.get(route.node.id).value,
      config.nostr.pow.minDifficulty,
      config.nostr.pow.adaptive,
    ),
    ...(config.quotas.enabled ? currentQuotas(ctx, route.node.id) : {}),
  });
  return {
    status: 200,
    headers: {
      ...DEFAULT_CORS,
      ...fetched.cors,
      ...route.headers,
      'content-type': 'application/nostr+json',
    },
    body: JSON.stringify(doc),
  };
}
