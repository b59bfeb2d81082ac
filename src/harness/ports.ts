import { readFileSync, readdirSync, readlinkSync } from 'node:fs';
import net from 'node:net';

export class PortInUseError extends Error {
  override name = 'PortInUseError';
}

/** Resolve when 127.0.0.1:port can be bound; otherwise say what holds it, if visible. */
export async function assertPortFree(port: number, purpose: string): Promise<void> {
  const free = await new Promise<boolean>((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
  if (free) return;
  const holder = describePortHolder(port);
  throw new PortInUseError(
    `port ${port} (${purpose}) is already in use${holder ? ` by ${holder}` : ''}; ` +
      'stop that process or choose another port (--port / --base-port)',
  );
}

/** "pid 123 (valkey-server)" for the process listening on a TCP port, when /proc shows it. */
export function describePortHolder(port: number): string | undefined {
  const inodes = listeningInodes(port);
  if (inodes.size === 0) return undefined;
  let pids: string[];
  try {
    pids = readdirSync('/proc').filter((d) => /^\d+$/.test(d));
  } catch {
    return undefined;
  }
  for (const pid of pids) {
    let fds: string[];
    try {
      fds = readdirSync(`/proc/${pid}/fd`);
    } catch {
      continue;
    }
    for (const fd of fds) {
      try {
        const link = readlinkSync(`/proc/${pid}/fd/${fd}`);
        const inode = /^socket:\[(\d+)\]$/.exec(link)?.[1];
        if (inode && inodes.has(inode)) return `pid ${pid} (${processName(pid)})`;
      } catch {
        // the fd closed while we looked
      }
    }
  }
  return 'another process (not visible to this user)';
}

function listeningInodes(port: number): Set<string> {
  const inodes = new Set<string>();
  const hexPort = port.toString(16).toUpperCase().padStart(4, '0');
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text: string;
    try {
      text = readFileSync(table, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/);
      // local_address is ADDR:PORT in hex; state 0A is LISTEN; column 9 is the inode.
      if (cols[1]?.endsWith(`:${hexPort}`) && cols[3] === '0A' && cols[9]) inodes.add(cols[9]);
    }
  }
  return inodes;
}

export function processName(pid: number | string): string {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
  } catch {
    return 'unknown';
  }
}

/** A loopback port with nothing listening on it (the OS picks it). */
export async function freeLoopbackPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}
