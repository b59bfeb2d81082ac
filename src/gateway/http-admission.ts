/**
 * An HTTP request as admission decides it: its target, class and size, then its quota. An
 * event POSTed to one of nostr.httpEventPaths goes through the one write pipeline
 * (write/pipeline.ts) as a WebSocket EVENT does, its outcome answered in HTTP: a forward with
 * the ticket the relay's answer settles, or a problem (400 invalid, 403 refused by policy, 429
 * or 503 by quota). Where the two transports still differ: write/transport-differences.ts.
 */
import type { QuotaDecision, QuotaRequest } from '../quota/decider.js';
import type { Identity, Policy } from '../quota/policy.js';
import {
  costExceedsQuota,
  quotaProblem,
  rateLimitHeaders,
  storeUnavailableProblem,
} from '../quota/responses.js';
import type { Limit } from '../config/schema.js';
import type { Problem } from '../quota/responses.js';
import { parseEvent } from '../nostr/frames.js';
import {
  costsMoreThanQuotaDetail,
  earlyRetryCloseRefusal,
  malformedRefusal,
} from '../nostr/refusals.js';
import { ChargePlan } from '../write/charge-plan.js';
import { runWrite, senderIdentity, writeSenders } from '../write/pipeline.js';
import type { WriteTicket } from '../write/ticket.js';
import type { WriteOutcome, WriteServices } from '../write/write-state.js';
import { parseRequestTarget } from './request-target.js';
import type { RequestTarget } from './request-target.js';
import type { AdmissionServices } from './write-services.js';
import type { UpstreamState } from './upstreams.js';

/** Who sends: the socket's address (after trusted proxies) and the API key it presented. */
export interface SenderFacts {
  ip: string;
  apiKey?: string;
}

export interface HttpFacts extends SenderFacts {
  method: string;
  url: string | undefined;
  /** Declared Content-Length; NaN or undefined when absent. */
  contentLength?: number;
  /** The body of a request on a path that takes one Nostr event (nostr.httpEventPaths). */
  eventBody?: Buffer;
}

export type HttpVerdict =
  | {
      action: 'forward';
      node: UpstreamState;
      target: RequestTarget;
      /** RateLimit headers to add to the relay's answer. */
      headers: Record<string, string>;
      /** An HTTP event's write: the relay's answer settles it (see http-forward.ts). */
      ticket?: WriteTicket;
    }
  | {
      action: 'answer';
      problem: Problem;
      headers: Record<string, string>;
      /** Hold the answer this long first (an early retry: see write/early-retries.ts). */
      holdMs?: number;
      /** Close the client's connection once answered (a bouncer past limits.earlyRetries.max). */
      close?: boolean;
    };

function problemOf(status: number, type: string, title: string, detail: string): Problem {
  return { type: `urn:sluice:problem:${type}`, title, status, detail };
}

const invalidEvent = (detail: string) => problemOf(400, 'invalid-event', 'Bad Request', detail);

/**
 * An HTTP request: its target, class and size; an event POSTed to an event path goes through
 * the write pipeline, any other write or read pays its sender's quota, then the node's budget.
 */
export async function httpVerdict(
  ctx: AdmissionServices,
  writes: WriteServices,
  facts: HttpFacts,
): Promise<HttpVerdict> {
  const config = ctx.config;
  const policy = ctx.policy.pin();
  const target = parseRequestTarget(facts.url);
  if (!target) {
    return answer(
      problemOf(400, 'bad-request-target', 'Bad Request', 'the request target is not usable'),
    );
  }
  const { cls, cost } = policy.classify(facts.method, target.path);
  if (cls === 'deny') return answer(problemOf(404, 'not-found', 'Not Found', 'no such resource'));
  const { maxBodyBytes } = config.limits;
  if ((facts.contentLength ?? 0) > maxBodyBytes) {
    const detail = `request bodies are limited to ${maxBodyBytes} bytes`;
    return answer(problemOf(413, 'body-too-large', 'Content Too Large', detail));
  }
  // The sender's identity (a salted hash) only where it is used: routing among several nodes
  // by client, or a charge by route (an event's write makes its own).
  let identity: Identity | undefined;
  const sender = (): Identity => (identity ??= senderIdentity(config, policy, facts));
  const node = ctx.pool.pick(ctx.pool.hashesClients() ? sender().key : '');
  if (!node) {
    const detail = 'no relay node is available; retry in 1 s';
    const problem = problemOf(503, 'no-relay', 'Service Unavailable', detail);
    return answer(problem, { 'retry-after': '1' });
  }
  if (cls === 'exempt') return { action: 'forward', node, target, headers: {} };
  if (facts.eventBody !== undefined) {
    return httpEventVerdict(writes, facts, facts.eventBody, node, target);
  }
  const forwarded = (headers: Record<string, string>): HttpVerdict => {
    if (cls === 'write') writes.forwarded(node.id, facts.contentLength ?? 0, cost);
    return { action: 'forward', node, target, headers };
  };
  // A cost over a whole quota it would pay is refused as no retry passes, before any charge:
  // the sender, and for a write the ranges holding its address (writeSenders).
  const payers = cls === 'write' ? writeSenders(config, policy, [sender()]) : [sender()];
  for (const payer of payers) {
    const over = policy.quotaBelow(payer, cls, cost, facts.ip);
    if (!over) continue;
    const { points, windowSec } = over;
    return costlyAnswer(costsMoreThanQuotaDetail(cls, cost, points, windowSec), cls, over);
  }
  const charged =
    cls === 'write'
      ? await chargeWrite(writes, facts, payers, node.id, cost, policy)
      : await chargeRead(writes, {
          identity: sender(),
          ip: facts.ip,
          cls,
          cost,
          nodeId: node.id,
          policy,
        });
  const { shown, node: nodeDecision, refused } = charged;
  if (!shown && !refused) return forwarded({});
  const { headers: headerOptions } = config.quotas;
  const headers = rateLimitHeaders((shown ?? refused)!, headerOptions, nodeDecision ?? undefined);
  if (!refused) return forwarded(headers);
  // A quota store failure in fail-closed mode is our problem, not the client's: 503, never 429.
  if (refused.outcome === 'error') return answer(storeUnavailableProblem(), { 'retry-after': '1' });
  // A range's refusal shows the range's quota (the address's own was admitted, and given back).
  const shownHere = refused === shown || refused === nodeDecision;
  return answer(
    quotaProblem(refused),
    shownHere ? headers : rateLimitHeaders(refused, headerOptions),
  );
}

/** What a request's charges showed: the client's quota, the node's budget, and any refusal. */
interface Charged {
  shown: QuotaDecision | undefined;
  node: QuotaDecision | null;
  refused: QuotaDecision | undefined;
}

/**
 * A write (not an event) pays as an event's senders do (charge-plan.ts): its sender and the
 * ranges holding its address, all or none, then, once they admitted it, the node's budget (the
 * heaviest writers are refused by their caps and never draw on what the node takes from all).
 */
async function chargeWrite(
  writes: WriteServices,
  facts: HttpFacts,
  senders: Identity[],
  nodeId: string,
  cost: number,
  policy: Policy,
): Promise<Charged> {
  const plan = new ChargePlan(writes.charger, {
    ip: facts.ip,
    nodeId,
    cost,
    budgetPayer: senders[0]!,
    policy,
  });
  const refusal = (await plan.payFee(senders)) ?? (await plan.payBudget());
  // The time named covers every counter the plan saw refuse (the address, its ranges).
  const refused = refusal && plan.longestWait(refusal).decision;
  return { shown: plan.shown, node: plan.node, refused };
}

/** A read pays its sender's read quota. */
async function chargeRead(writes: WriteServices, req: QuotaRequest): Promise<Charged> {
  const decision = await writes.charger.take(req);
  const refused = decision && !decision.admitted ? decision : undefined;
  return { shown: decision ?? undefined, node: null, refused };
}

async function httpEventVerdict(
  services: WriteServices,
  facts: HttpFacts,
  body: Buffer,
  node: UpstreamState,
  target: RequestTarget,
): Promise<HttpVerdict> {
  let raw: unknown;
  try {
    raw = JSON.parse(body.toString('utf8'));
  } catch {
    return answer(invalidEvent(malformedRefusal('the body is not JSON')));
  }
  const parsed = parseEvent(raw);
  if (parsed.type === 'BAD_EVENT') return answer(invalidEvent(malformedRefusal(parsed.reason)));
  const { ip, apiKey } = facts;
  const outcome = await runWrite(services, {
    event: parsed.event,
    bytes: body.length,
    ip,
    apiKey,
    nodeId: node.id,
  });
  const headerOptions = services.config().quotas.headers;
  const shown = (node?: QuotaDecision | null) => {
    const { shown } = outcome.plan ?? {};
    return shown ? rateLimitHeaders(shown, headerOptions, node ?? undefined) : {};
  };
  if (outcome.type === 'refused') return refusedAnswer(outcome, shown, headerOptions);
  // A replay of a stored event: the relay answers it (in its own format), no ticket to settle.
  const ticket = outcome.type === 'forward' ? outcome.ticket : undefined;
  return { action: 'forward', node, target, headers: shown(outcome.plan.node), ticket };
}

function refusedAnswer(
  outcome: Extract<WriteOutcome, { type: 'refused' }>,
  shown: (node?: QuotaDecision | null) => Record<string, string>,
  headerOptions: Parameters<typeof rateLimitHeaders>[1],
): HttpVerdict {
  const { decision, message } = outcome;
  switch (outcome.kind) {
    case 'invalid':
      return answer(invalidEvent(message));
    case 'early': {
      const { retrySec, holdMs, closes } = outcome.early!;
      const shownNow = { ...decision!, remaining: 0, resetSec: retrySec };
      const detail = closes ? earlyRetryCloseRefusal(retrySec) : message;
      const problem = { ...quotaProblem(shownNow), detail, retryAfter: retrySec };
      const headers = rateLimitHeaders(shownNow, headerOptions);
      // Past max early retries in the window, the bouncer's connection closes, as over
      // WebSocket: its other requests on it are not read.
      if (closes) headers.connection = 'close';
      return { action: 'answer', problem, headers, holdMs, close: closes };
    }
    case 'costly':
      return costlyAnswer(message, 'write', outcome.over!);
    case 'quota': {
      if (!decision || decision.outcome === 'error') {
        return answer(storeUnavailableProblem(), { 'retry-after': '1' });
      }
      const headers =
        outcome.by === 'budget' ? shown(decision) : rateLimitHeaders(decision, headerOptions);
      return answer(quotaProblem(decision), headers);
    }
    default:
      return answer(problemOf(403, 'event-refused', 'Forbidden', message));
  }
}

/** A request no wait lets pass: 403, no Retry-After (see costExceedsQuota). */
function costlyAnswer(detail: string, cls: 'write' | 'read', limit: Limit): HttpVerdict {
  const { problem, headers } = costExceedsQuota(detail, cls, limit);
  return answer(problem, headers);
}

function answer(problem: Problem, headers: Record<string, string> = {}): HttpVerdict {
  return { action: 'answer', problem, headers };
}
