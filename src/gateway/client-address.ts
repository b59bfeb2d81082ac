import type { IncomingMessage } from 'node:http';
import proxyAddr from '@fastify/proxy-addr';

/**
 * Who the client is, network-wise. X-Forwarded-For is believed only from configured trusted
 * proxies; from anyone else it is ignored, so a client cannot pick its own identity.
 */
export class ClientAddress {
  private readonly trust: (addr: string, i: number) => boolean;

  constructor(trustedProxies: readonly string[]) {
    try {
      this.trust = proxyAddr.compile([...trustedProxies]);
    } catch (err) {
      throw new Error(`trustedProxies: ${(err as Error).message}`, { cause: err });
    }
  }

  /** The client's IP: the peer, or the nearest untrusted hop that trusted proxies report. */
  ip(req: IncomingMessage): string {
    return normalise(proxyAddr(req, this.trust));
  }

  /** The X-Forwarded-For to send upstream: the trusted chain as seen, ending with the peer. */
  forwardedFor(req: IncomingMessage): string {
    // proxyAddr.all lists the peer first, then each address a trusted hop reported.
    return proxyAddr.all(req, this.trust).map(normalise).reverse().join(', ');
  }
}

/** "::ffff:127.0.0.1" -> "127.0.0.1": one spelling per client, one quota. */
function normalise(addr: string): string {
  return addr.startsWith('::ffff:') && addr.includes('.') ? addr.slice(7) : addr;
}
