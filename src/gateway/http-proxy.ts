import { setTimeout as sleep } from 'node:timers/promises';
import type { IncomingHttpHeaders } from 'node:http';
import type { Readable } from 'node:stream';
import replyFrom from '@fastify/reply-from';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Problem } from '../quota/responses.js';
import type { GatewayContext } from './context.js';
import { forwardToRelay } from './http-forward.js';
import { parseRequestTarget } from './request-target.js';
import {
  RELAY_INFO_TIMEOUT_MS,
  RelayInfoSource,
  relayInfoAnswer,
  relayInfoFetcher,
  wantsRelayInfo,
} from './relay-info.js';
import { limitedBody, readWhole, upstreamDispatcher } from './upstream-io.js';

function sendProblem(reply: FastifyReply, problem: Problem, headers: Record<string, string> = {}) {
  return reply.code(problem.status).headers(headers).type('application/problem+json').send(problem);
}

/**
 * Every method and path goes to a relay node through @fastify/reply-from (undici), with the
 * body streamed. Writes consume quota first; a rejected write never reaches the node.
 */
export async function registerHttpProxy(app: FastifyInstance, ctx: GatewayContext): Promise<void> {
  const { limits } = ctx.config;
  const dispatcher = upstreamDispatcher();
  // reply-from leaves a dispatcher it was given open: destroyed once the app has closed.
  app.addHook('onClose', async () => dispatcher.destroy());
  await app.register(replyFrom, {
    undici: dispatcher,
    disableRequestLogging: !ctx.config.logging.requests,
  });

  // Leave bodies unread: reply-from streams them to the node as they arrive.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (req, payload, done) => {
    done(null, limitedBody(payload, limits.maxBodyBytes));
  });

  const relayInfo = new RelayInfoSource(
    relayInfoFetcher(dispatcher, Math.min(RELAY_INFO_TIMEOUT_MS, limits.upstreamTimeoutMs)),
  );
  const handler = async (request: FastifyRequest, reply: FastifyReply) => {
    // An event written over HTTP is read whole (bounded by maxBodyBytes) and judged as one.
    const eventBody = carriesEvent(ctx, request)
      ? await readBody(request.body as Readable | undefined)
      : undefined;
    if (eventBody instanceof Error) {
      return sendProblem(reply, {
        type: 'urn:sluice:problem:body-too-large',
        title: 'Content Too Large',
        status: 413,
        detail: `request bodies are limited to ${limits.maxBodyBytes} bytes`,
      });
    }
    const verdict = await ctx.admission.http({
      method: request.method,
      url: request.raw.url,
      ip: ctx.address.ip(request.raw),
      apiKey: headerValue(request.headers, ctx.config.identity.apiKeyHeader),
      contentLength: Number(request.headers['content-length'] ?? 0),
      eventBody,
    });
    if (verdict.action === 'answer') {
      if (verdict.holdMs) await sleep(verdict.holdMs);
      // Its answer says `Connection: close`; the socket goes once the answer is written, so
      // nothing more the client pipelined on it is read.
      if (verdict.close) reply.raw.once('finish', () => request.raw.socket.destroy());
      return sendProblem(reply, verdict.problem, verdict.headers);
    }
    if (eventBody !== undefined) {
      // The body was read here: the relay gets it from memory (see forwardToRelay).
      request.body = eventBody;
    }
    // NIP-11: the relay's document with the gateway's limits, admitted as any read.
    if (wantsRelayInfo(request.method, request.headers)) {
      const info = await relayInfoAnswer(ctx, relayInfo, verdict, clientGone(reply));
      if (!info) return reply; // the client went away: nothing to answer
      if (info.status !== 200) return sendProblem(reply, info.problem, info.headers);
      return reply.code(200).headers(info.headers).send(info.body);
    }
    return forwardToRelay(ctx, request, reply, verdict);
  };
  app.all('/', handler);
  app.all('/*', handler);
}

/** Aborts when the client's connection closes before its answer is sent (or has already). */
function clientGone(reply: FastifyReply): AbortSignal {
  const gone = new AbortController();
  const res = reply.raw;
  if (res.destroyed) gone.abort();
  else res.once('close', () => res.writableFinished || gone.abort());
  return gone.signal;
}

function carriesEvent(ctx: GatewayContext, request: FastifyRequest): boolean {
  if (request.method !== 'POST') return false;
  const path = parseRequestTarget(request.raw.url)?.path;
  return path !== undefined && ctx.config.nostr.httpEventPaths.includes(path);
}

/** The whole body, or the error that ended it (over the limit, the client gone). */
async function readBody(body: Readable | undefined): Promise<Buffer | Error> {
  if (!body) return Buffer.alloc(0);
  try {
    return await readWhole(body);
  } catch (err) {
    return err instanceof Error ? err : new Error(String(err));
  }
}

function headerValue(headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}
