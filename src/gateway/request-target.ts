/**
 * The request target as the relay will read it. Routers decode `%XX`, strip absolute-form
 * origins and resolve dot segments, so every decision (deny, exempt, cost) is taken on that
 * form, and the same form is what gets forwarded: the relay never sees a spelling the gateway
 * did not judge.
 */
export interface RequestTarget {
  /** Origin-form to forward: dot segments resolved, fragment dropped, query kept. */
  forward: string;
  /** For matching routes: percent-decoded, dot segments resolved, repeated slashes collapsed. */
  path: string;
}

/** Only used to resolve relative targets; never contacted. */
const BASE = 'http://gateway.invalid';

/**
 * An origin-form target that every step below would leave as it is: segments of unreserved and
 * sub-delimiter characters (none empty, none starting with a dot, no `%`), an optional trailing
 * slash, and an optional non-empty query of characters URL does not re-encode. Its path is its
 * own judged form and the target its own forward form, with no URL parsed.
 */
const PLAIN_TARGET =
  /^(\/|(?:\/[\w~!$&()*+,;=:@-][\w.~!$&()*+,;=:@-]*)+\/?)(\?[\w.~!$&()*+,;=:@/?%-]+)?$/;

/** The last target parsed and its result: one request asks twice (proxy, then admission). */
let lastRaw: string | undefined;
let lastTarget: RequestTarget | undefined;

/**
 * Undefined when the target cannot be a request for the relay (not origin- or absolute-form,
 * bad percent-encoding, or a decoded NUL): the caller answers 400. The result is shared
 * (frozen): never change it.
 */
export function parseRequestTarget(raw: string | undefined): RequestTarget | undefined {
  if (raw === lastRaw && raw !== undefined) return lastTarget;
  const target = parseOnce(raw);
  lastRaw = raw;
  lastTarget = target;
  return target;
}

function parseOnce(raw: string | undefined): RequestTarget | undefined {
  if (!raw || raw.length > 8192) return undefined;
  const plain = PLAIN_TARGET.exec(raw);
  if (plain) return Object.freeze({ forward: raw, path: plain[1]! });
  return parseRequestTargetByUrl(raw);
}

/** The general case, through URL: what the plain form above must always agree with. */
export function parseRequestTargetByUrl(raw: string | undefined): RequestTarget | undefined {
  if (!raw || raw.length > 8192) return undefined;
  const absolute = /^https?:\/\//i.test(raw);
  if (!absolute && !raw.startsWith('/')) return undefined;
  let url: URL;
  try {
    // Origin-form is appended, never resolved: "//admin/x" is a path, not a host named admin.
    url = new URL(absolute ? raw : BASE + raw);
  } catch {
    return undefined;
  }
  let decoded: string;
  try {
    decoded = decodeURIComponent(url.pathname);
  } catch {
    return undefined;
  }
  if (decoded.includes('\0')) return undefined;
  // A decoded "%2e%2e" or "%2f" could form new segments: resolve once more on the decoded form.
  const segments: string[] = [];
  for (const segment of decoded.split('/')) {
    if (segment === '' || segment === '.') continue;
    if (segment === '..') segments.pop();
    else segments.push(segment);
  }
  const trailing = decoded.length > 1 && decoded.endsWith('/') && segments.length > 0 ? '/' : '';
  // One leading slash: a relay that resolves "//a/b" against a base must not read a host.
  const forward = url.pathname.replace(/^\/+/, '/') + url.search;
  return Object.freeze({ forward, path: `/${segments.join('/')}${trailing}` });
}
