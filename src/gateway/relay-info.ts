/**
 * NIP-11 through the gateway: a GET with `Accept: application/nostr+json` is answered with
 * the relay's information document, fetched (bounded in bytes and time, cached a few seconds
 * per relay node and path, whatever the query; at most RELAY_INFO_MAX_FETCHES at once) and
 * merged with the gateway's own limits.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { LRUCache } from 'lru-cache';
import type { Problem } from '../quota/responses.js';
import type { GatewayContext } from './context.js';
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
type Fetched =
  | { ok: true; doc: Record<string, unknown>; cors: Record<string, string> }
  | { ok: false; reason: string; busy?: boolean };

class RelayInfoFailure extends Error {}

/** Fetches per relay node and path, shared while in flight and reused while fresh. */
export class RelayInfoSource {
  private readonly cache = new LRUCache<string, Promise<Fetched>>({
    max: CACHE_ENTRIES,
    ttl: RELAY_INFO_CACHE_MS,
  });

  private inFlight = 0;

  constructor(private readonly timeoutMs: number) {}

  /** `url` without its query: the document is the relay's, whatever a client appends. */
  get(url: string): Promise<Fetched> {
    let entry = this.cache.get(url);
    if (!entry) {
      if (this.inFlight >= RELAY_INFO_MAX_FETCHES) {
        return Promise.resolve({ ok: false, busy: true, reason: 'too many fetches in flight' });
      }
      this.inFlight++;
      const fetching = fetchRelayInfo(url, this.timeoutMs).finally(() => this.inFlight--);
      this.cache.set(url, fetching);
      // A failure is remembered for a second only: long enough to spare a struggling relay
      // a flood of fetches, short enough not to outlast a restart.
      void fetching.then((fetched) => {
        if (!fetched.ok && this.cache.get(url) === fetching) {
          this.cache.set(url, fetching, { ttl: FAILURE_CACHE_MS });
        }
      });
      entry = fetching;
    }
    return entry;
  }
}

async function fetchRelayInfo(url: string, timeoutMs: number): Promise<Fetched> {
  try {
    const res = await fetch(url, {
      headers: { accept: 'application/nostr+json' },
      signal: AbortSignal.timeout(timeoutMs),
      redirect: 'error',
    });
    if (!res.ok) {
      await res.body?.cancel();
      throw new RelayInfoFailure(`the relay answered ${res.status}`);
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
    res.headers.forEach((value, name) => {
      if (name.startsWith('access-control-')) cors[name] = value;
    });
    return { ok: true, doc: doc as Record<string, unknown>, cors };
  } catch (err) {
    if (err instanceof RelayInfoFailure) return { ok: false, reason: err.message };
    const cause = (err as { cause?: unknown }).cause;
    const timedOut = [err, cause].some((e) => e instanceof Error && e.name === 'TimeoutError');
    return {
      ok: false,
      reason: timedOut
        ? `the relay did not answer within ${timeoutMs} ms`
        : 'the relay could not be reached',
    };
  }
}

/** The body as text, abandoned past `max` bytes. */
async function boundedText(res: Response, max: number): Promise<string> {
  const declared = Number(res.headers.get('content-length') ?? 0);
  if (declared > max) {
    await res.body?.cancel();
    throw new RelayInfoFailure(`the relay's document exceeds ${max} bytes`);
  }
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of res.body ?? []) {
    size += (chunk as Uint8Array).byteLength;
    if (size > max) throw new RelayInfoFailure(`the relay's document exceeds ${max} bytes`);
    chunks.push(chunk);
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

/** The merged document for an admitted NIP-11 request, or a 502 naming what failed. */
export async function relayInfoAnswer(
  ctx: GatewayContext,
  source: RelayInfoSource,
  route: ForwardRoute,
): Promise<RelayInfoAnswer> {
  const fetched = await source.get(route.node.url + route.target.forward.split('?')[0]!);
  if (!fetched.ok && fetched.busy) {
    return {
      status: 503,
      headers: { ...DEFAULT_CORS, 'retry-after': '1' },
      problem: {
        type: 'urn:sluice:problem:busy',
        title: 'Service Unavailable',
        status: 503,
        detail: 'too many relay information documents are being fetched; retry in a second',
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
