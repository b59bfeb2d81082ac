/**
 * An event POSTed to one of nostr.httpEventPaths: parsed, then through the one write pipeline
 * (write/pipeline.ts) as a WebSocket EVENT is, its outcome answered in HTTP: a forward with the
 * ticket the relay's answer settles, or a problem (400 invalid, 403 refused by policy, 429 or
 * 503 by quota). Where the two transports still differ: write/transport-differences.ts.
 */
import type { QuotaDecision } from '../quota/decider.js';
import { quotaProblem, rateLimitHeaders, storeUnavailableProblem } from '../quota/responses.js';
import type { Problem } from '../quota/responses.js';
import { parseEvent } from '../nostr/frames.js';
import { runWrite } from '../write/pipeline.js';
import type { WriteTicket } from '../write/ticket.js';
import type { WriteOutcome, WriteServices } from '../write/write-state.js';
import type { RequestTarget } from './request-target.js';
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
  | { action: 'answer'; problem: Problem; headers: Record<string, string> };

function problemOf(status: number, type: string, title: string, detail: string): Problem {
  return { type: `urn:sluice:problem:${type}`, title, status, detail };
}

const invalidEvent = (detail: string) => problemOf(400, 'invalid-event', 'Bad Request', detail);

export async function httpEventVerdict(
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
    return answer(invalidEvent('invalid: the body is not JSON'));
  }
  const parsed = parseEvent(raw);
  if (parsed.type === 'BAD_EVENT') return answer(invalidEvent(`invalid: ${parsed.reason}`));
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

function answer(problem: Problem, headers: Record<string, string> = {}): HttpVerdict {
  return { action: 'answer', problem, headers };
}
