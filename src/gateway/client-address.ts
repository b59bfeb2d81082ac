import type { IncomingMessage } from 'node:http';
import { isIPv4, isIPv6 } from 'node:net';
import proxyAddr from '@fastify/proxy-addr';

export interface ClientAddressOptions {
  /** IPv6 clients are one client per network of this prefix (128: per address). */
  ipv6PrefixLength?: number;
}

/**
 * Who the client is, network-wise. X-Forwarded-For is believed only from configured trusted
 * proxies; from anyone else it is ignored, so a client cannot pick its own identity.
 */
export class ClientAddress {
  private readonly trust: (addr: string, i: number) => boolean;
  private readonly ipv6PrefixLength: number;
  private readonly chains = new WeakMap<IncomingMessage, string[]>();

  constructor(trustedProxies: readonly string[], options: ClientAddressOptions = {}) {
    try {
      this.trust = proxyAddr.compile([...trustedProxies]);
    } catch (err) {
      throw new Error(`trustedProxies: ${(err as Error).message}`, { cause: err });
    }
    this.ipv6PrefixLength = options.ipv6PrefixLength ?? 64;
  }

  /**
   * The client as quotas and limits count it: the peer, or the nearest untrusted hop that
   * trusted proxies report. IPv4 as is; IPv6 as its network ("2001:db8:1:2::/64"), since one
   * subscriber usually holds a whole /64 and could otherwise be a new client per address.
   */
  ip(req: IncomingMessage): string {
    const chain = this.chain(req);
    return clientNetwork(chain[chain.length - 1]!, this.ipv6PrefixLength);
  }

  /** The X-Forwarded-For to send upstream: the trusted chain as seen, ending with the peer. */
  forwardedFor(req: IncomingMessage): string {
    return this.chain(req).map(normalise).reverse().join(', ');
  }

  /**
   * The peer first, then each address a trusted hop reported (proxyAddr.all), worked out once
   * per request: both the quota identity and the relay's X-Forwarded-For need it.
   */
  private chain(req: IncomingMessage): string[] {
    let chain = this.chains.get(req);
    if (!chain) {
      chain = proxyAddr.all(req, this.trust);
      this.chains.set(req, chain);
    }
    return chain;
  }

  /** Whether the direct peer is a trusted proxy (whose forwarding headers are believed). */
  peerTrusted(req: IncomingMessage): boolean {
    const peer = req.socket.remoteAddress;
    return peer !== undefined && this.trustsPeer(peer);
  }

  /** The client a direct peer is when nothing it forwards is read (as `ip` counts it). */
  peerIp(peer: string): string {
    return clientNetwork(peer, this.ipv6PrefixLength);
  }

  /** Whether a direct peer at this address is a trusted proxy. */
  trustsPeer(peer: string): boolean {
    return this.trust(peer, 0);
  }
}

/** "::ffff:127.0.0.1" -> "127.0.0.1": one spelling per client, one quota. */
function normalise(addr: string): string {
  return addr.startsWith('::ffff:') && addr.includes('.') ? addr.slice(7) : addr;
}

/**
 * One spelling per client: IPv4 (and IPv4-mapped IPv6) as the dotted address; IPv6 masked to
 * `prefixLength` bits in RFC 5952 form with the length ("2001:db8::/64"), or at 128 the
 * canonical address alone. A zone id ("fe80::1%eth0") names an interface, not a client: dropped.
 * Anything unparsable is returned as given.
 */
export function clientNetwork(addr: string, prefixLength: number): string {
  const plain = addr.split('%')[0] ?? addr;
  if (isIPv4(plain)) return plain;
  const groups = ipv6Groups(plain);
  if (!groups) return addr;
  if (groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff) {
    return `${groups[6]! >> 8}.${groups[6]! & 0xff}.${groups[7]! >> 8}.${groups[7]! & 0xff}`;
  }
  if (prefixLength >= 128) return formatIpv6(groups);
  const masked = groups.map((group, i) => {
    const bits = Math.min(16, Math.max(0, prefixLength - i * 16));
    return group & ((0xffff << (16 - bits)) & 0xffff);
  });
  return `${formatIpv6(masked)}/${prefixLength}`;
}

/** The eight 16-bit groups of an IPv6 address (a dotted IPv4 tail allowed), or undefined. */
function ipv6Groups(addr: string): number[] | undefined {
  if (!isIPv6(addr)) return undefined;
  let text = addr.toLowerCase();
  const v4 = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (v4) {
    const [a, b, c, d] = v4.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, v4.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = '', tail] = text.split('::');
  const parse = (part: string) => (part ? part.split(':').map((g) => parseInt(g, 16)) : []);
  const left = parse(head);
  const right = tail === undefined ? [] : parse(tail);
  const zeros = 8 - left.length - right.length;
  if (tail === undefined ? zeros !== 0 : zeros < 1) return undefined;
  return [...left, ...Array<number>(zeros).fill(0), ...right];
}

/** RFC 5952: lower case, no leading zeros, the longest run of two or more zero groups as "::". */
function formatIpv6(groups: readonly number[]): string {
  let bestStart = -1;
  let bestLength = 0;
  for (let i = 0; i < groups.length;) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < groups.length && groups[j] === 0) j++;
    if (j - i > bestLength) {
      bestStart = i;
      bestLength = j - i;
    }
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (bestLength < 2) return hex.join(':');
  const head = hex.slice(0, bestStart).join(':');
  const tail = hex.slice(bestStart + bestLength).join(':');
  return `${head}::${tail}`;
}
