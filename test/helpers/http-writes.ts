import { finalizeEvent, generateSecretKey } from 'nostr-tools/pure';
import { request } from './gateway.js';
import type { GatewayUnderTest } from './gateway.js';

/**
 * HTTP writes (POST /events) from loopback addresses, for suites where the address is the
 * client: one key signs every event, and is no identity there.
 */
export function httpWrites(thirdOctet: number) {
  const sk = generateSecretKey();
  let written = 0;
  let address = 0;
  return {
    /** One write from `from`. */
    write: (gw: GatewayUnderTest, from: string) => {
      const event = finalizeEvent(
        { kind: 1, created_at: Math.floor(Date.now() / 1000), tags: [], content: `w${written++}` },
        sk,
      );
      return request(`${gw.url}/events`, { method: 'POST', body: JSON.stringify(event), from });
    },
    /** An address no write came from yet. */
    freshClient: (): string => {
      address++;
      return `127.0.${thirdOctet + Math.floor(address / 250)}.${(address % 250) + 2}`;
    },
  };
}
