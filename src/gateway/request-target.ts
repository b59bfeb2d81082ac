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
 * Undefined when the target cannot be a request for the relay (not origin- or absolute-form,
 * bad percent-encoding, or a decoded NUL): the caller answers 400.
 */
export function parseRequestTarget(raw: string | undefined): RequestTarget | undefined {
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
  return { forward, path: `/${segments.join('/')}${trailing}` };
}
