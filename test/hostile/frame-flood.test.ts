/**
 * Attack: one address floods frames over many connections. The frame rate of a source
 * address is bounded in memory before anything else is done with a frame; other addresses
 * are served as before.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { NostrClient, startGateway } from '../helpers/gateway.js';
import type { GatewayUnderTest } from '../helpers/gateway.js';
import { startRelay } from '../helpers/processes.js';
import type { RelayProcess } from '../helpers/processes.js';

const PER_SEC = 20;

describe('frame rate per source address', { timeout: 60_000 }, () => {
  let relay: RelayProcess;
  let gw: GatewayUnderTest;
  const clients: NostrClient[] = [];

  before(async () => {
    relay = await startRelay({ nodeId: 'relay-a' });
    gw = await startGateway('ioredis', 'standalone', [{ id: 'relay-a', url: relay.url }], {
      quotas: { keyPrefix: `flood${Date.now().toString(36)}` },
      limits: { framesPerSecPerAddress: PER_SEC },
    });
  });

  after(async () => {
    for (const c of clients) c.close();
    await gw?.proc.stop();
    await relay?.stop();
  });

  it('refuses frames past the address rate over all its connections, not other addresses', async () => {
    const flooders = await Promise.all(
      [0, 1, 2].map(() => NostrClient.connect(gw.url, '127.0.12.2')),
    );
    clients.push(...flooders);
    const sent = 90;
    for (let i = 0; i < sent; i++) flooders[i % 3]!.send(['CLOSE', `s${i}`]);
    // CLOSE frames are forwarded silently when admitted: refusals are the only answers. The
    // budget refills each second, so allow for one refill while the frames are in flight.
    const refusals = () => flooders.flatMap((f) => f.received).filter((m) => m[0] === 'NOTICE');
    await flooders[0]!.until(() => refusals().length >= sent - 2 * PER_SEC);
    const refused = refusals();
    assert.ok(refused.length <= sent - PER_SEC, `${refused.length} of ${sent} refused`);
    assert.match(String(refused[0]![1]), /^rate-limited: too many messages from this address/);

    const other = await NostrClient.connect(gw.url, '127.0.12.3');
    clients.push(other);
    other.send(['REQ', 'mine', { limit: 1 }]);
    await other.until((m) => m.some((x) => x[0] === 'EOSE' && x[1] === 'mine'));
    assert.ok(!other.received.some((m) => m[0] === 'NOTICE'), 'another address is not refused');
  });
});
