import assert from 'node:assert/strict';
import path from 'node:path';
import { describe, it } from 'node:test';
import { resolveTarget } from '../../../src/pressure/feed/feed-process.js';
import {
  SamplerError,
  cgroupSampler,
  parseKeyValues,
  parseLimit,
  parsePressure,
  parsePrometheusValue,
  processSampler,
} from '../../../src/pressure/feed/samplers.js';
import { decodeReport, encodeReport, pressureKey } from '../../../src/pressure/report.js';

const MiB = 1024 * 1024;
/** Real cgroup files copied from this kind of machine, and v2 ones (see test/fixtures/README.md). */
const FIXTURES = path.resolve(import.meta.dirname, '../../../../test/fixtures');
const fixture = (name: string) => path.join(FIXTURES, name);

describe('kernel and exposition formats', { timeout: 60_000 }, () => {
  it('parses cgroup v2 memory.stat and memory.pressure as the kernel writes them', () => {
    const stat = parseKeyValues(
      'anon 104857600\nfile 52428800\ninactive_file 20971520\nactive_file 31457280\n',
    );
    assert.equal(stat.inactive_file, 20971520);
    const psi = parsePressure(
      'some avg10=1.25 avg60=0.50 avg300=0.10 total=12345\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n',
    );
    assert.equal(psi.some_avg10, 1.25);
    assert.equal(psi.full_total, 0);
  });

  it('finds a metric in Prometheus text, labels or not', () => {
    const text =
      '# HELP m x\n# TYPE m gauge\nrelay_rss_bytes 123\nrelay_rss_anon_bytes{node="a"} 4.5e+07\n';
    assert.equal(parsePrometheusValue(text, 'relay_rss_anon_bytes'), 45_000_000);
    assert.equal(parsePrometheusValue(text, 'relay_rss'), undefined);
    assert.equal(parsePrometheusValue(text, 'relay_rss_anon_bytes', '{node="a"}'), 45_000_000);
    assert.equal(parsePrometheusValue(text, 'relay_rss_anon_bytes', '{node="b"}'), undefined);
  });
});

describe('pressure reports', { timeout: 60_000 }, () => {
  it('round-trip, and anything else is ignored rather than trusted', () => {
    const report = {
      node: 'relay-a',
      m: 0.45,
      u: 0.93,
      uhat: 1.01,
      mode: 'normal' as const,
      seq: 7,
      ts: 1_700_000_000_000,
      law: 'lead',
    };
    assert.deepEqual(decodeReport(encodeReport(report)), report);
    assert.equal(decodeReport('{"node":"a","m":7}'), undefined);
    assert.equal(decodeReport('not json'), undefined);
    assert.equal(decodeReport(null), undefined);
    assert.equal(pressureKey('relay-a'), 'sluice:pressure:{relay-a}');
  });
});

describe('cgroup samplers on real files of both versions', { timeout: 60_000 }, () => {
  it('v1: usage_in_bytes less total_inactive_file, no limit at the root', async () => {
    const { bytes, detail } = await cgroupSampler(fixture('cgroup-v1/root')).sample();
    assert.equal(detail.version, 1);
    assert.equal(detail.usage, 3631165440);
    assert.equal(detail.inactiveFile, 1975508992);
    assert.equal(bytes, 3631165440 - 1975508992);
    // 9223372036854771712 is how v1 writes "no limit".
    assert.equal(detail.limit, Infinity);
    assert.equal(detail.oomKill, 0);
    assert.equal(detail.failcnt, 0);
  });

  it("v1: a limited group's page cache is not counted, its limit is", async () => {
    const { bytes, detail } = await cgroupSampler(fixture('cgroup-v1/cached')).sample();
    assert.equal(detail.limit, 256 * MiB);
    assert.equal(detail.inactiveFile, 50335744, 'the 48 MiB file it wrote');
    assert.equal(bytes, 143646720 - 50335744);
  });

  it("v1: the kernel's OOM kill and failed charges show in the detail", async () => {
    const { bytes, detail } = await cgroupSampler(fixture('cgroup-v1/oom-killed')).sample();
    assert.equal(detail.limit, 160 * MiB);
    assert.equal(detail.oomKill, 1);
    assert.equal(detail.underOom, 0);
    assert.equal(detail.failcnt, 91);
    assert.equal(bytes, 41598976);
  });

  it('v2: memory.current less inactive_file, memory.max, oom_kill and PSI', async () => {
    const { bytes, detail } = await cgroupSampler(fixture('cgroup-v2/limited')).sample();
    assert.equal(detail.version, 2);
    assert.equal(detail.usage, 154222592);
    assert.equal(detail.inactiveFile, 32 * MiB);
    assert.equal(bytes, 154222592 - 32 * MiB);
    assert.equal(detail.limit, 256 * MiB);
    assert.equal(detail.oomKill, 2);
    assert.equal(detail.some_avg10, 3.14);
  });

  it("v2: 'max' is no limit; a missing memory.events or PSI still reads", async () => {
    const { detail } = await cgroupSampler(fixture('cgroup-v2/unlimited')).sample();
    assert.equal(detail.limit, Infinity);
    assert.equal(detail.oomKill, 0);
    assert.equal(detail.some_avg10, undefined);
  });

  it('names the fix for a v2 group without the memory controller, and a missing one', async () => {
    await assert.rejects(
      cgroupSampler(fixture('cgroup-v2/no-memory-controller')).sample(),
      (err: Error) =>
        err instanceof SamplerError &&
        /neither memory.current \(cgroup v2\) nor memory.usage_in_bytes/.test(err.message) &&
        /\+memory.*cgroup.subtree_control/.test(err.message),
    );
    await assert.rejects(
      cgroupSampler(fixture('cgroup-v9')).sample(),
      /cannot read .*cgroup-v9: ENOENT/,
    );
  });

  it('limits: max and the v1 huge value are none, garbage is an error', () => {
    assert.equal(parseLimit('max\n'), Infinity);
    assert.equal(parseLimit('9223372036854771712\n'), Infinity);
    assert.equal(parseLimit('268435456\n'), 256 * MiB);
    assert.throws(() => parseLimit('-1'), /not a memory limit/);
  });

  it('--target-fraction: a share of the limit; none without a limit or a cgroup', async () => {
    const v1 = fixture('cgroup-v1/oom-killed');
    assert.equal(
      await resolveTarget({ targetFraction: 0.5, cgroup: v1 }, cgroupSampler(v1)),
      80 * MiB,
    );
    assert.equal(await resolveTarget({ targetBytes: 123 }, cgroupSampler(v1)), 123);
    const unlimited = fixture('cgroup-v2/unlimited');
    await assert.rejects(
      resolveTarget({ targetFraction: 0.8, cgroup: unlimited }, cgroupSampler(unlimited)),
      /has no memory limit.*give --target-bytes/,
    );
    await assert.rejects(
      resolveTarget({ targetFraction: 0.8 }, processSampler(process.pid)),
      /needs --cgroup/,
    );
    await assert.rejects(
      resolveTarget({ targetFraction: 0.8, targetBytes: 1 }, cgroupSampler(v1)),
      /exactly one of --target-bytes and --target-fraction/,
    );
  });
});
