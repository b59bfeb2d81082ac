/**
 * Client addresses as quotas count them: one spelling per client, and the networks that hold
 * it (pure maths, no I/O).
 */
import { isIPv4, isIPv6 } from 'node:net';

/**
 * One spelling per client: IPv4 (and IPv4-mapped IPv6) as the dotted address; IPv6 masked to
 * `prefixLength` bits in RFC 5952 form with the length ("2001:db8::/64"), or at 128 the
 * canonical address alone. A zone id ("fe80::1%eth0") names an interface, not a client: dropped,
 * as is a port a proxy appended. Anything unparsable is returned as given (one client per
 * spelling: only a trusted proxy's own hop can be one, never what a client writes before it).
 */
export function clientNetwork(addr: string, prefixLength: number): string {
  const plain = withoutPort(addr).split('%')[0]!;
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

/**
 * An address as some proxies append it to X-Forwarded-For, with a port ("192.0.2.1:5678",
 * "[2001:db8::1]:443") or in brackets: the address alone, so that each source port is not a
 * client of its own. Anything else is returned as given.
 */
function withoutPort(addr: string): string {
  const bracketed = /^\[([^\]]+)\](?::\d+)?$/.exec(addr);
  if (bracketed) return bracketed[1]!;
  const v4 = /^(\d+\.\d+\.\d+\.\d+):\d+$/.exec(addr);
  return v4 ? v4[1]! : addr;
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

/**
 * The network of `prefixLength` bits holding a client as `clientNetwork` spells it (an IPv4
 * address; an IPv6 network such as "2001:db8:1:2::/64", or an address): "198.51.100.0/24",
 * "2001:db8:1::/48". Undefined when the prefix is not shorter than the client's own network,
 * or the client is of the other family or no address at all: a range is never the client.
 */
export function enclosingNetwork(
  client: string,
  family: 'ipv4' | 'ipv6',
  prefixLength: number,
): string | undefined {
  if (isIPv4(client)) {
    if (family !== 'ipv4' || prefixLength >= 32) return undefined;
    const octets = client.split('.').map(Number);
    const bits = octets.reduce((n, o) => n * 256 + o, 0);
    const masked = bits - (bits % 2 ** (32 - prefixLength));
    const out = [24, 16, 8, 0].map((shift) => Math.floor(masked / 2 ** shift) % 256);
    return `${out.join('.')}/${prefixLength}`;
  }
  if (family !== 'ipv6') return undefined;
  const slash = client.indexOf('/');
  const address = slash < 0 ? client : client.slice(0, slash);
  const own = slash < 0 ? 128 : Number(client.slice(slash + 1));
  if (prefixLength >= own || ipv6Groups(address) === undefined) return undefined;
  const network = clientNetwork(address, prefixLength);
  // An IPv4-mapped address is spelled as IPv4 by clientNetwork: no IPv6 range holds it.
  return network.includes('/') ? network : undefined;
}
