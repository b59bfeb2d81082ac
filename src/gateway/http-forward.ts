import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import type { Readable } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Problem } from '../quota/responses.js';
import type { RelayVerdict, WriteTicket } from '../write/ticket.js';
import type { GatewayContext } from './context.js';
import type { RequestTarget } from './request-target.js';
import { CLIENT_GONE, blameOf, clientError, readWhole } from './upstream-io.js';
import type { UpstreamState } from './upstreams.js';

/** Where an admitted request goes, and the RateLimit headers to add to the relay's answer. */
export interface ForwardRoute {
  node: UpstreamState;
  target: RequestTarget;
  headers: Record<string, string>;
  /** An HTTP event's write, settled by the relay's answer before the client gets it. */
  ticket?: WriteTicket | undefined;
}

/**
 * The largest relay answer read whole to see whether it says `duplicate:`; a longer one (or
 * one of unknown length) is streamed as is and taken as not a duplicate. A relay's answer to
 * one event is a short JSON object.
 */
export const MAX_INSPECTED_ANSWER_BYTES = 64 * 1024;

/**
 * The message of a relay's answer to an HTTP event: a JSON object's `message` (the reference
 * relay's), or a NIP-01 OK array's.
 */
export function answerMessage(body: Buffer): string | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    return undefined;
  }
  let message: unknown;
  if (Array.isArray(parsed)) {
    const ok = parsed as unknown[];
    if (ok[0] === 'OK') message = ok[3];
  } else if (typeof parsed === 'object' && parsed !== null) {
    message = (parsed as { message?: unknown }).message;
  }
  return typeof message === 'string' ? message : undefined;
}

/** Whether a relay's answer to an HTTP event says it had the event already. */
export function answerSaysDuplicate(body: Buffer): boolean {
  return answerMessage(body)?.startsWith('duplicate:') === true;
}

/**
 * What an HTTP answer says of the write: a 2xx stored it (or had it: `duplicate:`), a 4xx
 * refused it (`invalid:` apart), anything else may have stored it (lost: kept).
 */
export function relayVerdictOf(status: number, message: string | undefined): RelayVerdict {
  if (status >= 200 && status < 300) {
    return message?.startsWith('duplicate:') ? 'duplicate' : 'stored';
  }
  if (status >= 400 && status < 500) return message?.startsWith('invalid:') ? 'invalid' : 'refused';
  return 'lost';
}

/**
 * Hop-by-hop headers (RFC 9110 section 7.6.1) and the ones undici refuses outright
 * (transfer-encoding, keep-alive, upgrade, expect: see undici/lib/core/request.js): they
 * describe the client's connection to the gateway, not the gateway's to the relay.
 */
const HOP_BY_HOP = [
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'transfer-encoding',
  'upgrade',
  'te',
  'trailer',
  'expect',
  'http2-settings',
];

/** Claims about the client's connection: replaced by what the gateway saw, or dropped. */
const CONNECTION_CLAIMS = [
  'forwarded',
  'x-forwarded-for',
  'x-forwarded-proto',
  'x-forwarded-host',
  'x-forwarded-port',
  'x-real-ip',
];

/** Header names listed in a Connection header: hop-by-hop too (RFC 9110 section 7.6.1). */
function connectionListed(headers: IncomingHttpHeaders): readonly string[] {
  const value = headers.connection;
  if (value === undefined) return NONE;
  const list = Array.isArray(value) ? value.join(',') : value;
  return list
    .split(',')
    .map((name) => name.trim().toLowerCase())
    .filter(Boolean);
}

const NONE: readonly string[] = [];
const DROPPED_FROM_RESPONSES = new Set(HOP_BY_HOP);
/** Per identity settings (a reload makes new ones): what requests never take to the relay. */
const droppedFromRequests = new WeakMap<object, Set<string>>();

function requestDrops(identity: GatewayContext['config']['identity']): Set<string> {
  let dropped = droppedFromRequests.get(identity);
  if (!dropped) {
    const credentials = [identity.apiKeyHeader, 'authorization'].filter(
      (h) => !identity.forwardCredentials.includes(h),
    );
    dropped = new Set([...HOP_BY_HOP, ...CONNECTION_CLAIMS, ...credentials]);
    droppedFromRequests.set(identity, dropped);
  }
  return dropped;
}

/** A copy without the named headers (built, not deleted from: that keeps objects fast). */
function without(
  headers: IncomingHttpHeaders,
  dropped: ReadonlySet<string>,
  listed: readonly string[],
): IncomingHttpHeaders {
  const kept: IncomingHttpHeaders = {};
  for (const name in headers) {
    if (dropped.has(name) || (listed.length > 0 && listed.includes(name))) continue;
    kept[name] = headers[name];
  }
  return kept;
}

/** http or https: what a trusted proxy says its client used, else the gateway's own (http). */
function forwardedProto(ctx: GatewayContext, req: IncomingMessage): string {
  const claimed = req.headers['x-forwarded-proto'];
  if (typeof claimed === 'string' && ctx.address.peerTrusted(req)) {
    const proto = claimed.split(',').pop()?.trim().toLowerCase();
    if (proto === 'http' || proto === 'https') return proto;
  }
  return 'http';
}

/** The headers the relay gets: no hop-by-hop, no credentials unless configured, our XFF. */
export function relayRequestHeaders(
  ctx: GatewayContext,
  req: IncomingMessage,
  headers: IncomingHttpHeaders,
): IncomingHttpHeaders {
  const kept = without(headers, requestDrops(ctx.config.identity), connectionListed(req.headers));
  kept['x-forwarded-for'] = ctx.address.forwardedFor(req);
  kept['x-forwarded-proto'] = forwardedProto(ctx, req);
  return kept;
}

/** The relay's answer as the client gets it: its own hop-by-hop headers dropped, ours added. */
export function clientResponseHeaders(
  headers: IncomingHttpHeaders,
  limitHeaders: Record<string, string>,
): IncomingHttpHeaders {
  const kept = without(headers, DROPPED_FROM_RESPONSES, connectionListed(headers));
  for (const name in limitHeaders) kept[name] = limitHeaders[name];
  return kept;
}

function sendProblem(reply: FastifyReply, problem: Problem, headers: Record<string, string> = {}) {
  return reply.code(problem.status).headers(headers).type('application/problem+json').send(problem);
}

/** What reply-from is told of a body read whole that came without a type (then dropped). */
const NO_TYPE = 'application/octet-stream';

/**
 * Forward an admitted request to its relay node through @fastify/reply-from (undici), the body
 * streamed as it arrives. A client that goes away (or is timed out by the listener) while its
 * body is still streaming cancels the upstream request, so a half-sent body never holds a
 * relay connection; a request without a body ends at the relay's answer (within
 * upstreamTimeoutMs), which is then dropped. Only the relay's own failures count against its
 * health.
 */
export function forwardToRelay(
  ctx: GatewayContext,
  request: FastifyRequest,
  reply: FastifyReply,
  route: ForwardRoute,
): FastifyReply {
  const { node } = route;
  const given = request.body as Readable | Buffer | undefined;
  // An event's body, read whole for its admission: sent from memory with its length.
  const read = Buffer.isBuffer(given) ? given : undefined;
  const body = read ? undefined : (given as Readable | undefined);
  if (body && typeof body.destroy === 'function') {
    // Failed while the request waited for its admission (over the limit, client gone).
    if (body.errored) {
      answerForwardError(ctx, reply, node, body.errored);
      return reply;
    }
    // The client's own request (a declared length, see limitedBody) needs no watch: Node ends
    // it with an error when its client goes, and undici aborts on that.
    if (body !== request.raw) cancelOnClientGone(reply, body);
  }

  try {
    return reply.from(node.url + route.target.forward, {
      timeout: ctx.config.limits.upstreamTimeoutMs,
      // A relay's answer (503 included) goes to the client as it is: never replayed.
      retryDelay: () => null,
      ...(read ? { body: read, contentType: request.headers['content-type'] ?? NO_TYPE } : {}),
      rewriteRequestHeaders: (_req, headers) => {
        const kept = relayRequestHeaders(ctx, request.raw, headers);
        // reply-from names a type for a body it is given: the client's, or none as it sent.
        if (read && request.headers['content-type'] === undefined) delete kept['content-type'];
        return kept;
      },
      rewriteHeaders: (headers) => clientResponseHeaders(headers, route.headers),
      onError: (rep, { error }) => {
        settle(ctx, route.ticket, 'lost');
        answerForwardError(ctx, rep as FastifyReply, node, error);
      },
      ...(route.ticket ? { onResponse: inspected(ctx, node, route.ticket) as never } : {}),
    });
  } catch (err) {
    // reply-from refuses some requests itself (a "/.." segment once decoded): the client's doing.
    ctx.log.debug({ node: node.id, code: (err as { code?: string }).code }, 'request refused');
    return sendProblem(reply, {
      type: 'urn:sluice:problem:bad-request',
      title: 'Bad Request',
      status: 400,
      detail: 'the request cannot be forwarded as sent',
    });
  }
}

/** A streamed body still arriving is failed when its client goes: undici then aborts its request. */
function cancelOnClientGone(reply: FastifyReply, body: Readable): void {
  reply.raw.once('close', () => {
    if (reply.raw.writableFinished || body.destroyed) return;
    // undici aborts the request (and drops its socket to the relay) when its body errors.
    body.on('error', () => {});
    body.destroy(clientError(CLIENT_GONE, 'the client went away before its answer'));
  });
}

/** Settle a ticket from the proxy (errors are logged, never thrown at the client's answer). */
function settle(ctx: GatewayContext, ticket: WriteTicket | undefined, verdict: RelayVerdict): void {
  ticket?.settle(verdict).catch((err: unknown) => {
    ctx.metrics.internalErrors.inc({ where: 'frame' });
    ctx.log.error({ err }, 'settling a relay answer failed');
  });
}

/**
 * reply-from's onResponse for an HTTP event: the relay's answer read whole (when short: see
 * MAX_INSPECTED_ANSWER_BYTES) and settles the ticket, then sent as it came.
 */
function inspected(ctx: GatewayContext, node: UpstreamState, ticket: WriteTicket) {
  return (
    _request: FastifyRequest,
    reply: FastifyReply,
    res: { statusCode: number; headers: IncomingHttpHeaders; stream: Readable },
  ): void => {
    const length = Number(res.headers['content-length']);
    if (!(length <= MAX_INSPECTED_ANSWER_BYTES)) {
      settle(ctx, ticket, relayVerdictOf(res.statusCode, undefined));
      reply.send(res.stream);
      return;
    }
    readWhole(res.stream).then(
      (body) => {
        settle(ctx, ticket, relayVerdictOf(res.statusCode, answerMessage(body)));
        reply.send(body);
      },
      (err: unknown) => {
        settle(ctx, ticket, 'lost');
        // The relay failed mid-answer: its own headers (their length) no longer describe one.
        reply.removeHeader('content-length');
        answerForwardError(ctx, reply, node, err instanceof Error ? err : new Error(String(err)));
      },
    );
  };
}

function answerForwardError(
  ctx: GatewayContext,
  reply: FastifyReply,
  node: UpstreamState,
  error: Error,
): void {
  // When the body fails, the upstream library may report only that it aborted: the body's
  // own error says why (over the limit is not the same as gone).
  const body = reply.request.body as Readable | undefined;
  // A body taken as it came (see limitedBody) is the client's own request: its failure is the
  // client's connection failing (reset, timed out), whatever its code says.
  const bodyError =
    body === reply.request.raw && body.errored
      ? clientError(CLIENT_GONE, 'the client went away before its body ended')
      : body?.errored;
  const blame = blameOf(bodyError ?? error);
  if (blame.party === 'relay') {
    ctx.metrics.upstreamErrors.inc({ node: node.id });
    ctx.pool.reportFailure(node.id, error.message);
  } else if (blame.party === 'unknown') {
    ctx.log.warn({ node: node.id, err: error }, 'forwarding failed for a reason not classified');
  }
  if (blame.party === 'client' && blame.reason === 'gone') {
    reply.raw.destroy();
    return;
  }
  if (blame.party === 'client' && blame.reason === 'body-too-large') {
    const limit = ctx.config.limits.maxBodyBytes;
    afterLingering(reply, () =>
      sendProblem(
        reply,
        {
          type: 'urn:sluice:problem:body-too-large',
          title: 'Content Too Large',
          status: 413,
          detail: `request bodies are limited to ${limit} bytes`,
        },
        { connection: 'close' },
      ),
    );
    return;
  }
  if (blame.party === 'client') {
    void sendProblem(reply, {
      type: 'urn:sluice:problem:bad-request',
      title: 'Bad Request',
      status: 400,
      detail: 'the request cannot be forwarded as sent',
    });
    return;
  }
  const timeout = blame.party === 'relay' && blame.timeout;
  void sendProblem(reply, {
    type: timeout ? 'urn:sluice:problem:gateway-timeout' : 'urn:sluice:problem:bad-gateway',
    title: timeout ? 'Gateway Timeout' : 'Bad Gateway',
    status: timeout ? 504 : 502,
    detail: `relay node ${node.id} could not be reached`,
  });
}

/** What a refused body may still send, and for how long, before its socket is cut. */
const LINGER_BYTES = 1024 * 1024;
const LINGER_MS = 1000;

/**
 * Answer once the rest of a refused request body has been read and dropped (bounded in bytes
 * and time): closing a socket with unread input sends a reset, which can destroy the answer
 * before the client reads it.
 */
function afterLingering(reply: FastifyReply, answer: () => unknown): void {
  const raw = reply.request.raw;
  if (raw.readableEnded || raw.destroyed) {
    answer();
    return;
  }
  let drained = 0;
  let done = false;
  const finish = () => {
    if (done) return;
    done = true;
    clearTimeout(timer);
    raw.off('data', onData);
    answer();
  };
  const onData = (chunk: Buffer) => {
    drained += chunk.length;
    if (drained > LINGER_BYTES) finish();
  };
  const timer = setTimeout(finish, LINGER_MS);
  timer.unref();
  raw.on('data', onData);
  raw.once('end', finish);
  raw.once('close', finish);
  raw.resume();
}
