/**
 * The request target: the plain form read without URL (the common case) agrees with the URL
 * route on every target, and a repeated target is parsed once.
 *
 * A property failure prints fast-check's seed; replay it with SLUICE_PROPERTY_SEED=<seed>.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  parseRequestTarget,
  parseRequestTargetByUrl,
} from '../../../src/gateway/request-target.js';
import { propertyParams } from '../../helpers/property-params.js';

/** Characters that make targets interesting: separators, dots, escapes, what URL re-encodes. */
const CHARS = [...'/?.%#\\ab_~!$&\'()*+,;=:@-2e"<>`{}|^[] \t'];
const targets = fc
  .array(fc.constantFrom(...CHARS), { maxLength: 24 })
  .map((chars) => `/${chars.join('')}`);

describe('request target', () => {
  it('agrees with the URL route on every target', () => {
    fc.assert(
      fc.property(targets, (raw) => {
        assert.deepEqual(parseRequestTarget(raw), parseRequestTargetByUrl(raw), raw);
      }),
      propertyParams(20_000),
    );
  });

  it('reads the common targets as the URL route does', () => {
    for (const raw of [
      '/',
      '/events',
      '/events/',
      '/a/b?x=1&y=%zz',
      '/?q',
      '/a?',
      '//admin/x',
      '/a/../b',
      '/.well-known/x',
      '/a/./b/',
      '/%2e%2e/admin',
      "/a?it's",
      '/a b',
      '/a\\b',
      '/a#frag',
      'http://host/a/b?c',
      '*',
      '',
    ]) {
      assert.deepEqual(parseRequestTarget(raw), parseRequestTargetByUrl(raw), raw);
    }
    assert.deepEqual(parseRequestTarget('/events?x=1'), {
      forward: '/events?x=1',
      path: '/events',
    });
  });

  it('gives the same frozen result to a repeated target', () => {
    const first = parseRequestTarget('/repeated/target');
    assert.equal(parseRequestTarget('/repeated/target'), first);
    assert.ok(Object.isFrozen(first));
    assert.equal(parseRequestTarget(undefined), undefined);
  });
});
