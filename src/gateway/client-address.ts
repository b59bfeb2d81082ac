import type { IncomingMessage } from 'node:http';
import proxyAddr from '@fastify/proxy-addr';
import { clientNetwork } from '../util/ip-network.js';

export { clientNetwork } from '../util/ip-network.js';

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
