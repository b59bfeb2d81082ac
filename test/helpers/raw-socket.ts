/**
 * What a client library would not send: WebSocket upgrades and frames written by hand over
 * node:net, plus the readings hostile tests assert on (metrics, relay stats, process RSS).
 */
import { readFileSync } from 'node:fs';
import net from 'node:net';
import { request } from './gateway.js';

/** A valid Sec-WebSocket-Key (16 bytes, base64). */
export const WS_KEY = 'dGhlIHNhbXBsZSBub25jZQ==';

/** The headers of a well-formed upgrade; a test deletes or changes some. */
export function upgradeHeaders(host: string): Record<string, string | undefined> {
  return {
    Host: host,
    Upgrade: 'websocket',
    Connection: 'Upgrade',
    'Sec-WebSocket-Key': WS_KEY,
    'Sec-WebSocket-Version': '13',
  };
}

export interface UpgradeAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
  /** After a 101, the open socket (paused, with the server's first frames unshifted). */
  socket: net.Socket;
}

/**
 * Send one upgrade request as written (`target` and headers exactly as given) and read the
 * answer's head; a refusal's body is read to the end. Rejects past `timeoutMs`.
 */
export function rawUpgrade(
  baseUrl: string,
  opts: {
    method?: string;
    target?: string;
    headers?: Record<string, string | undefined>;
    from?: string;
    timeoutMs?: number;
  } = {},
): Promise<UpgradeAnswer> {
  const { hostname, port, host } = new URL(baseUrl);
  const headers = { ...upgradeHeaders(host), ...opts.headers };
  const head =
    `${opts.method ?? 'GET'} ${opts.target ?? '/'} HTTP/1.1\r\n` +
    Object.entries(headers)
      .filter(([, v]) => v !== undefined)
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join('') +
    '\r\n';
  return new Promise((resolve, reject) => {
    const socket = net.connect({
      host: hostname,
      port: Number(port),
      localAddress: opts.from ?? '127.0.0.1',
    });
    let received = Buffer.alloc(0);
    let answer: { status: number; headers: Record<string, string> } | undefined;
    let bodyStart = 0;
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no answer to ${opts.target ?? '/'} within ${opts.timeoutMs ?? 10_000} ms`));
    }, opts.timeoutMs ?? 10_000);
    const finish = (result: UpgradeAnswer) => {
      clearTimeout(timer);
      resolve(result);
    };
    socket.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      if (answer) return;
      const end = received.indexOf('\r\n\r\n');
      if (end < 0) return;
      const lines = received.subarray(0, end).toString('latin1').split('\r\n');
      const status = Number(lines[0]!.split(' ')[1]);
      const parsed: Record<string, string> = {};
      for (const line of lines.slice(1)) {
        const colon = line.indexOf(':');
        parsed[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
      }
      answer = { status, headers: parsed };
      bodyStart = end + 4;
      if (status === 101) {
        socket.removeAllListeners('data');
        socket.pause();
        // Anything past the head is the server's first frames: give it back to the stream.
        if (received.length > bodyStart) socket.unshift(received.subarray(bodyStart));
        finish({ ...answer, body: '', socket });
      }
    });
    socket.on('close', () => {
      if (answer && answer.status !== 101) {
        finish({ ...answer, body: received.subarray(bodyStart).toString('utf8'), socket });
      } else if (!answer) {
        clearTimeout(timer);
        reject(new Error(`connection closed without an answer to ${opts.target ?? '/'}`));
      }
    });
    socket.write(head);
  });
}

/** One client-to-server text frame (masked, as RFC 6455 requires; the mask is zeros). */
export function clientTextFrame(payload: string): Buffer {
  const data = Buffer.from(payload, 'utf8');
  if (data.length > 125) throw new Error('clientTextFrame: payloads up to 125 bytes');
  return Buffer.concat([Buffer.from([0x81, 0x80 | data.length, 0, 0, 0, 0]), data]);
}

/** Sum of a Prometheus counter or gauge over all its label sets (0 when absent). */
export function metricSum(text: string, name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    const matches = Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`));
    if (matches) sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return sum;
}

/** The gateway's metrics text, from its admin listener (no token needed). */
export async function metricsOf(adminUrl: string): Promise<string> {
  const res = await request(`${adminUrl}/metrics`);
  if (res.status !== 200) throw new Error(`/metrics answered ${res.status}`);
  return res.body;
}

/** Open WebSocket connections of a reference relay, from its /stats. */
export async function relayConnections(relayUrl: string): Promise<number> {
  const res = await request(`${relayUrl}/stats`);
  if (res.status !== 200) throw new Error(`relay /stats answered ${res.status}`);
  return (JSON.parse(res.body) as { connections: number }).connections;
}

/** Resident memory of a process (Linux /proc), in bytes. */
export function rssBytes(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = /^VmRSS:\s+(\d+)\s+kB/m.exec(status)?.[1];
  if (!kib) throw new Error(`no VmRSS for process ${pid}`);
  return Number(kib) * 1024;
}

/** Poll `probe` until it returns true; throws with `what` past the deadline. */
export async function waitFor(
  what: string,
  probe: () => boolean | Promise<boolean>,
  timeoutMs = 10_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Run `task` over `items` with at most `limit` at a time. */
export async function inBatches<T, R>(
  items: readonly T[],
  limit: number,
  task: (item: T, index: number) => Promise<R>,
): Promise<R[]> {
  const results: R[] = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      results[i] = await task(items[i]!, i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}

/**
 * Whether some process still holds the TCP connection from local port `serverPort` to peer
 * port `peerPort` (Linux /proc/net/tcp*: a row with an inode; a socket its process closed is
 * gone, or orphaned with inode 0 while the kernel finishes it). Reads this network namespace.
 */
export function connectionHeld(serverPort: number, peerPort: number): boolean {
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length < 10) continue;
      const port = (addr: string) => parseInt(addr.slice(addr.lastIndexOf(':') + 1), 16);
      if (port(f[1]!) === serverPort && port(f[2]!) === peerPort && f[9] !== '0') return true;
    }
  }
  return false;
}
