/** How flood writes reach the gateways: HTTP POST /events (the reference relay's API). */
import { postEvent } from '../run/post-event.js';
import { identityAddress } from './flood.js';
import type { Answer, FloodShape, FloodTransport } from './flood.js';

/** An HTTP answer as a client reads it: stored only on 2xx with `accepted: true`. */
export function classifyHttp(status: number, body: string): Answer {
  const code = status === 0 ? 'no answer' : String(status);
  if (status === 0) return { outcome: 'error', code };
  if (status >= 200 && status < 300) {
    let accepted = false;
    try {
      accepted = (JSON.parse(body) as { accepted?: unknown }).accepted === true;
    } catch {
      // Not JSON: not an acknowledgement.
    }
    return { outcome: accepted ? 'ok' : 'refused', code };
  }
  if (status === 429) return { outcome: 'limited', code };
  if (status >= 500) return { outcome: 'server', code };
  return { outcome: 'client', code };
}

/** Each write on a fresh connection from its identity's address, to the gateways in turn. */
export function httpTransport(gatewayUrls: string[], shape: FloodShape): FloodTransport {
  let k = 0;
  return {
    async send(identity, event) {
      const url = `${gatewayUrls[k++ % gatewayUrls.length]}/events`;
      const answer = await postEvent(url, event.json, identityAddress(shape, identity));
      return classifyHttp(answer.status, answer.body);
    },
    close: async () => {},
  };
}
