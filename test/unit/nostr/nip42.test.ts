import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { makeAuthEvent } from 'nostr-tools/nip42';
import { finalizeEvent, generateSecretKey } from 'nostr-tools/pure';
import { GatewayConfigSchema } from '../../../src/config/schema.js';
import { authEventProblem, sameRelayUrl } from '../../../src/nostr/nip42.js';

const URL_ = 'wss://relay.example.test';

describe('NIP-42 AUTH events (pure)', { timeout: 10_000 }, () => {
  const now = Math.floor(Date.now() / 1000);
  const sk = generateSecretKey();
  const expected = { challenge: 'c1', relayUrl: URL_, nowSec: now };

  it('accepts kind 22242 with this challenge, this relay and a recent created_at', () => {
    assert.equal(
      authEventProblem(finalizeEvent(makeAuthEvent(URL_, 'c1'), sk), expected),
      undefined,
    );
    const late = finalizeEvent({ ...makeAuthEvent(`${URL_}/`, 'c1'), created_at: now + 590 }, sk);
    assert.equal(authEventProblem(late, expected), undefined, 'within the window, trailing slash');
  });

  it('names what is wrong otherwise', () => {
    const auth = (relay: string, challenge: string, created_at = now) =>
      finalizeEvent({ ...makeAuthEvent(relay, challenge), created_at }, sk);
    assert.match(authEventProblem(auth(URL_, 'c2'), expected)!, /challenge tag/);
    assert.match(authEventProblem(auth('wss://other.test', 'c1'), expected)!, /relay tag/);
    assert.match(authEventProblem(auth(URL_, 'c1', now - 601), expected)!, /created_at/);
    assert.match(authEventProblem({ ...auth(URL_, 'c1'), kind: 1 }, expected)!, /kind 22242/);
    const noRelay = finalizeEvent(
      { kind: 22242, created_at: now, tags: [['challenge', 'c1']], content: '' },
      sk,
    );
    assert.match(authEventProblem(noRelay, expected)!, /relay tag/);
  });

  it('compares relay URLs as URLs', () => {
    assert.equal(sameRelayUrl('wss://Relay.Example.test/', 'wss://relay.example.test'), true);
    assert.equal(sameRelayUrl('wss://relay.example.test:443', 'wss://relay.example.test'), true);
    assert.equal(sameRelayUrl('ws://relay.example.test', 'wss://relay.example.test'), false);
    assert.equal(sameRelayUrl('wss://relay.example.test/a', 'wss://relay.example.test'), false);
    assert.equal(sameRelayUrl('not a url', 'wss://relay.example.test'), false);
  });

  it('requires nostr.publicUrl for the auth identity, auth-required writes and its own challenge', () => {
    const base = {
      admin: { token: '0123456789abcdef-auth' },
      upstreams: [{ id: 'relay-a', url: 'http://127.0.0.1:7001' }],
    };
    for (const extra of [
      { identity: { order: ['auth', 'ip'] } },
      { nostr: { authRequiredForWrites: true } },
      { nostr: { auth: { challenge: 'gateway' } } },
    ]) {
      const res = GatewayConfigSchema.safeParse({ ...base, ...extra });
      assert.equal(res.success, false);
      assert.deepEqual(
        res.error.issues.map((i) => i.path.join('.')),
        ['nostr.publicUrl'],
      );
    }
    const bad = GatewayConfigSchema.safeParse({ ...base, nostr: { publicUrl: 'https://x.test' } });
    assert.equal(bad.success, false, 'a WebSocket URL');
    const ok = GatewayConfigSchema.parse({
      ...base,
      identity: { order: ['auth', 'ip'] },
      nostr: { publicUrl: URL_, authRequiredForWrites: true },
    });
    assert.equal(ok.nostr.publicUrl, URL_);
  });
});
