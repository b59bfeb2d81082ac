import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocket, WebSocketServer } from 'ws';
import type { GatewayContext } from './context.js';
import { ProxiedConnection } from './ws-connection.js';

function rejectUpgrade(socket: Duplex, status: number, message: string): void {
  const body = JSON.stringify({ title: message, status });
  socket.end(
    `HTTP/1.1 ${status} ${status === 503 ? 'Service Unavailable' : 'Bad Gateway'}\r\n` +
      'Content-Type: application/problem+json\r\n' +
      `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}

/**
 * WebSocket upgrades on any path: the connection is pinned to one relay node (sticky by the
 * client's identity at connect) and accepted only once that node's socket is open, so a
 * client never holds a connection that leads nowhere.
 */
export function attachWebSocketProxy(server: Server, ctx: GatewayContext) {
  const { limits, identity } = ctx.config;
  // Frames above maxFrameBytes are answered by the gateway; far larger ones close the socket
  // (1009) before they are buffered.
  const maxPayload = limits.maxFrameBytes * 8;
  const wss = new WebSocketServer({ noServer: true, maxPayload, perMessageDeflate: false });
  const connections = new Set<ProxiedConnection>();

  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on('error', () => socket.destroy());
    const ip = ctx.address.ip(req);
    const apiKeyHeader = req.headers[identity.apiKeyHeader];
    const apiKey = Array.isArray(apiKeyHeader) ? apiKeyHeader[0] : apiKeyHeader;
    const who = ctx.admission.sender({ apiKey, ip });
    const node = ctx.pool.pick(who.key, true);
    if (!node) {
      rejectUpgrade(socket, 503, 'no relay node is available');
      return;
    }
    const upstream = new WebSocket(node.url.replace(/^http/, 'ws') + (req.url ?? '/'), {
      headers: { 'x-forwarded-for': ctx.address.forwardedFor(req) },
      perMessageDeflate: false,
      handshakeTimeout: ctx.config.healthCheck.timeoutMs * 5,
      maxPayload: 64 * 1024 * 1024,
    });
    let opened = false;
    const abandon = () => upstream.terminate();
    socket.once('close', abandon);
    upstream.on('error', (err) => {
      if (opened) return; // from now on the connection's own handler deals with errors
      ctx.metrics.upstreamErrors.inc({ node: node.id });
      ctx.pool.reportFailure(node.id, err.message);
      rejectUpgrade(socket, 502, `relay node ${node.id} could not be reached`);
    });
    upstream.once('open', () => {
      opened = true;
      socket.off('close', abandon);
      wss.handleUpgrade(req, socket, head, (client) => {
        ctx.metrics.openWebSockets.inc();
        const conn = new ProxiedConnection(
          client,
          upstream,
          ctx,
          { ip, apiKey, nodeId: node.id },
          () => {
            if (connections.delete(conn)) ctx.metrics.openWebSockets.dec();
          },
        );
        connections.add(conn);
      });
    });
  });

  return {
    /** Close every connection with 1001 (going away). */
    closeAll(reason: string): void {
      for (const conn of [...connections]) conn.close(1001, reason);
      wss.close();
    },
    get size() {
      return connections.size;
    },
  };
}
