import assert from 'node:assert/strict';
import { appendFileSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { finalizeEvent, generateSecretKey } from 'nostr-tools/pure';
import type { NostrEvent } from 'nostr-tools/pure';
import { parseBytes } from '../../../src/cli/flags.js';
import { toConfig } from '../../../src/cli/relay.js';
import { relayFlags } from '../../helpers/relay-flags.js';
import { DATA_FILE_NAME, DataFile } from '../../../src/relay/datafile.js';
import type { RecordMeta } from '../../../src/relay/datafile.js';
import {
  FilterError,
  filterFromQuery,
  matchesEvent,
  parseFilter,
} from '../../../src/relay/filter.js';
import { Memtable } from '../../../src/relay/memtable.js';
import { canonicalJson, checkEvent } from '../../../src/relay/validate.js';

const secret = generateSecretKey();
const event = (fields: Partial<NostrEvent> = {}): NostrEvent =>
  finalizeEvent(
    {
      kind: fields.kind ?? 1,
      created_at: fields.created_at ?? 1_700_000_000,
      tags: fields.tags ?? [],
      content: fields.content ?? 'hello',
    },
    secret,
  );

describe('relay memtable', { timeout: 30_000 }, () => {
  it('appends across slab boundaries and reads back any range', () => {
    const mt = new Memtable(1000, 16);
    const parts = ['hello ', 'wörld, this spans ', Buffer.from('several slabs'), '!'];
    const positions = parts.map((p) => mt.append(p));
    const whole = Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p) : p)));
    assert.equal(positions[0], 1000);
    assert.equal(mt.tailPos, 1000 + whole.length);
    assert.equal(mt.backlogBytes, whole.length);
    assert.equal(mt.slabCount, Math.ceil(whole.length / 16));

    const out = Buffer.alloc(whole.length);
    mt.copyOut(1000, whole.length, out);
    assert.deepEqual(out, whole);
    assert.deepEqual(Buffer.concat(mt.peek(20)), whole.subarray(0, 20));
  });

  it('releases a slab once it is fully drained, and only then', () => {
    const mt = new Memtable(0, 16);
    mt.append(Buffer.alloc(40, 1));
    assert.equal(mt.slabCount, 3);
    mt.advance(15);
    assert.equal(mt.slabCount, 3, 'head slab still has an unflushed byte');
    mt.advance(1);
    assert.equal(mt.slabCount, 2);
    assert.equal(mt.heldBytes, 24);
    assert.throws(() => mt.copyOut(10, 4, Buffer.alloc(4)), RangeError, 'flushed bytes are gone');
    assert.throws(() => mt.advance(100), RangeError);
    mt.advance(24);
    assert.equal(mt.backlogBytes, 0);
    assert.equal(mt.slabCount, 1, 'the partly filled tail slab stays for the next append');
    mt.append('more');
    mt.releaseAll();
    assert.equal(mt.slabCount, 0);
    assert.equal(mt.heldBytes, 0);
  });
});

describe('relay filters', { timeout: 30_000 }, () => {
  const e = event({
    kind: 7,
    created_at: 100,
    tags: [
      ['e', 'x'.repeat(64)],
      ['t', 'nostr'],
    ],
  });

  it('match every given condition; since and until are inclusive', () => {
    assert.ok(matchesEvent(parseFilter({}), e));
    assert.ok(matchesEvent(parseFilter({ ids: [e.id], authors: [e.pubkey], kinds: [1, 7] }), e));
    assert.ok(matchesEvent(parseFilter({ since: 100, until: 100 }), e));
    assert.ok(!matchesEvent(parseFilter({ since: 101 }), e));
    assert.ok(!matchesEvent(parseFilter({ until: 99 }), e));
    assert.ok(!matchesEvent(parseFilter({ kinds: [1] }), e));
    assert.ok(matchesEvent(parseFilter({ '#t': ['nostr', 'other'] }), e));
    assert.ok(!matchesEvent(parseFilter({ '#t': ['nostr'], '#p': ['a'] }), e));
  });

  it('reject what they cannot honour, naming the field', () => {
    const bad: [unknown, RegExp][] = [
      [[], /JSON object/],
      [{ ids: ['abc'] }, /ids must hold 64-character/],
      [{ kinds: [70000] }, /kinds must be an integer/],
      [{ limit: 1.5 }, /limit/],
      [{ search: 'x' }, /unsupported filter field "search"/],
      [{ '#t': [1] }, /#t values must be strings/],
    ];
    for (const [raw, message] of bad) assert.throws(() => parseFilter(raw), message);
  });

  it('parse from HTTP query parameters', () => {
    const f = filterFromQuery({ kinds: '1,7', authors: e.pubkey, since: '5', limit: '2' });
    assert.deepEqual(f.kinds, new Set([1, 7]));
    assert.deepEqual(f.authors, new Set([e.pubkey]));
    assert.equal(f.since, 5);
    assert.equal(f.limit, 2);
    assert.throws(() => filterFromQuery({ kinds: ['1', '2'] }), FilterError);
    assert.throws(() => filterFromQuery({ until: 'tomorrow' }), /until must be an integer/);
  });
});

describe('relay event validation', { timeout: 30_000 }, () => {
  it('accepts a signed event and stores it in canonical key order', () => {
    const e = event();
    const verdict = checkEvent(JSON.parse(JSON.stringify(e)), 1024);
    assert.ok(verdict.ok);
    assert.equal(verdict.json, canonicalJson(e));
    assert.deepEqual(Object.keys(JSON.parse(verdict.json) as object), [
      'id',
      'pubkey',
      'created_at',
      'kind',
      'tags',
      'content',
      'sig',
    ]);
  });

  it('names the reason for a refusal', () => {
    const e = event({ content: 'x'.repeat(2000) });
    const cases: [unknown, string][] = [
      [e, 'too_large'],
      [{ ...event(), content: 'edited' }, 'bad_id'],
      [{ ...event(), sig: 'a'.repeat(128) }, 'bad_signature'],
      [{ ...event(), created_at: -1 }, 'malformed'],
      [{ ...event(), extra: 1, pubkey: 'P'.repeat(64) }, 'malformed'],
    ];
    for (const [raw, reason] of cases) {
      const verdict = checkEvent(raw, 1024);
      assert.ok(!verdict.ok && verdict.reason === reason, `${reason}: ${JSON.stringify(verdict)}`);
      assert.match(verdict.message, /^invalid: /);
    }
  });

  it('skips only the signature when told not to verify (--no-verify-signatures)', () => {
    const forged = { ...event({ content: 'forged' }), sig: event().sig };
    const refused = checkEvent(forged, 1024);
    assert.ok(!refused.ok && refused.reason === 'bad_signature');
    assert.ok(checkEvent(forged, 1024, () => false, false).ok, 'stored without the check');
    const edited = checkEvent({ ...event(), content: 'edited' }, 1024, () => false, false);
    assert.ok(!edited.ok && edited.reason === 'bad_id', 'the id is still checked');
  });
});

describe('relay data file', { timeout: 30_000 }, () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'sluice-datafile-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('reindexes complete records and cuts an interrupted last one', async () => {
    const file = path.join(dir, DATA_FILE_NAME);
    const events = [event({ kind: 1 }), event({ kind: 2, content: 'zwei ü' })];
    const lines = events.map((e) => canonicalJson(e) + '\n');
    appendFileSync(file, lines.join('') + 'not a record\n' + canonicalJson(event()).slice(0, 50));

    const data = await DataFile.open(dir);
    try {
      const complete = Buffer.byteLength(lines.join('') + 'not a record\n');
      assert.equal(data.size, complete);
      assert.equal(data.truncatedBytes, 50);
      assert.equal(statSync(file).size, complete);

      const metas: RecordMeta[] = [];
      assert.deepEqual(await data.scan((m) => metas.push(m)), { records: 2, skipped: 1 });
      assert.deepEqual(
        metas.map((m) => [m.id, m.kind, m.createdAt]),
        events.map((e) => [e.id, e.kind, e.created_at]),
      );
      const second = Buffer.alloc(metas[1]!.len);
      await data.readInto(metas[1]!.pos, metas[1]!.len, second);
      assert.equal(second.toString('utf8'), canonicalJson(events[1]!));

      assert.equal(await data.append([Buffer.from('x\n')]), 2);
      assert.ok(readFileSync(file, 'utf8').endsWith('not a record\nx\n'));
    } finally {
      await data.close();
    }
  });
});

describe('relay options', { timeout: 30_000 }, () => {
  const flags = relayFlags();

  it('parse byte counts with binary units', () => {
    assert.equal(parseBytes('1048576'), 1048576);
    assert.equal(parseBytes('512KiB'), 512 * 1024);
    assert.equal(parseBytes('2mib'), 2 * 1024 * 1024);
    assert.equal(parseBytes('1g'), 1024 ** 3);
    assert.throws(() => parseBytes('fast'), /not a byte count/);
    assert.throws(() => parseBytes('1.5MiB'), /not a byte count/);
  });

  it('default the spike hold to half the interval and require both spike options', () => {
    assert.deepEqual(toConfig({ ...flags, spikeBytes: 10, spikeEveryMs: 300 }).spike, {
      bytes: 10,
      everyMs: 300,
      holdMs: 150,
    });
    assert.match(toConfig(flags).dataDir, /relay[/\\]n1$/);
    assert.throws(() => toConfig({ ...flags, spikeEveryMs: 300 }), /together/);
    assert.throws(() => toConfig({ ...flags, spikeHoldMs: 3 }), /needs --spike-bytes/);
  });

  it('verify signatures unless --no-verify-signatures is given', () => {
    assert.equal(toConfig({ ...flags, verifySignatures: true }).verifySignatures, undefined);
    assert.equal(toConfig({ ...flags, verifySignatures: false }).verifySignatures, false);
  });
});
