import { STATUS_CODES } from 'node:http';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import * as wsExports from 'ws';

/** Why an upgrade is answered without a connection, and with what. */
export interface UpgradeRefusal {
  status: number;
  /** Problem type suffix (urn:sluice:problem:...). */
  type: string;
  detail: string;
  headers?: Record<string, string>;
}

/** What ws accepts as a Sec-WebSocket-Key: 16 bytes in base64. */
const KEY = /^[+/0-9A-Za-z]{22}==$/;
/** ws's own Sec-WebSocket-Protocol parser (exported by ws, missing from its type definitions). */
const parseProtocols = wsProtocolParser();

function wsProtocolParser(): (header: string) => Set<string> {
  const parse = (
    wsExports as unknown as { subprotocol?: { parse?: (header: string) => Set<string> } }
  ).subprotocol?.parse;
  if (typeof parse !== 'function') {
    throw new Error('ws no longer exports its subprotocol parser: update upgrade-request.ts');
  }
  return parse;
}

function badRequest(detail: string, headers?: Record<string, string>): UpgradeRefusal {
  return { status: 400, type: 'bad-upgrade', detail, headers };
}

/**
 * The checks ws's WebSocketServer makes before it would accept the client, made before a
 * relay socket is opened for it: a request ws would refuse must cost the relay nothing.
 * Undefined when ws will accept the handshake.
 */
export function checkUpgradeRequest(req: IncomingMessage): UpgradeRefusal | undefined {
  if (req.method !== 'GET') {
    return { status: 405, type: 'bad-upgrade', detail: 'WebSocket upgrades use GET' };
  }
  const upgrade = req.headers.upgrade;
  if (upgrade === undefined || upgrade.toLowerCase() !== 'websocket') {
    return badRequest('the Upgrade header must be "websocket"');
  }
  const key = req.headers['sec-websocket-key'];
  if (key === undefined || !KEY.test(key)) {
    return badRequest('missing or invalid Sec-WebSocket-Key header');
  }
  const version = Number(req.headers['sec-websocket-version']);
  if (version !== 13 && version !== 8) {
    return badRequest('missing or invalid Sec-WebSocket-Version header', {
      'sec-websocket-version': '13, 8',
    });
  }
  const protocols = req.headers['sec-websocket-protocol'];
  if (protocols !== undefined && !validProtocolList(protocols)) {
    return badRequest('invalid Sec-WebSocket-Protocol header');
  }
  return undefined;
}

function validProtocolList(value: string): boolean {
  try {
    parseProtocols(value);
    return true;
  } catch {
    return false;
  }
}

/**
 * Answer an upgrade request over its raw socket with a problem document and close it. The
 * detail is the gateway's own text, never anything the client sent.
 */
export function rejectUpgrade(socket: Duplex, refusal: UpgradeRefusal): void {
  if (socket.destroyed) return;
  const { status, type, detail } = refusal;
  const title = STATUS_CODES[status] ?? 'Error';
  const body = JSON.stringify({ type: `urn:sluice:problem:${type}`, title, status, detail });
  const headers = {
    'Content-Type': 'application/problem+json',
    'Content-Length': String(Buffer.byteLength(body)),
    Connection: 'close',
    ...refusal.headers,
  };
  const head = Object.entries(headers)
    .map(([name, value]) => `${name}: ${value}`)
    .join('\r\n');
  // Destroy once written: a client that does not read the answer holds nothing.
  socket.once('finish', () => socket.destroy());
  socket.end(`HTTP/1.1 ${status} ${title}\r\n${head}\r\n\r\n${body}`);
}
