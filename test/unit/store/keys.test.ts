import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { clientKey } from '../../../src/store/index.js';

describe('clientKey', { timeout: 30_000 }, () => {
  it('hashes the identity and puts the hash tag on it', () => {
    const key = clientKey('203.0.113.7');
    assert.match(key, /^\{[A-Za-z0-9_-]{22}\}$/);
    assert.ok(!key.includes('203.0.113.7'));
  });

  it('is stable for one identity and salt, and differs across identities and salts', () => {
    assert.equal(clientKey('alice'), clientKey('alice'));
    assert.notEqual(clientKey('alice'), clientKey('bob'));
    assert.notEqual(clientKey('alice', 'salt-a'), clientKey('alice', 'salt-b'));
  });

  it('neutralises separators, braces and binary in identities', () => {
    for (const hostile of ['a:b', '{tag}', 'x}\r\n*3', '\u0000\uffff', 'é'.repeat(10_000)]) {
      assert.match(clientKey(hostile), /^\{[A-Za-z0-9_-]{22}\}$/);
    }
  });
});
