import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import {
  SamplerError,
  parseKeyValues,
  parsePressure,
  parsePrometheusValue,
  processSampler,
  prometheusSampler,
} from '../src/pressure/feed/samplers.js';
import { decodeReport, encodeReport, pressureKey } from '../src/pressure/report.js';
import { startRelay } from './helpers/processes.js';
import type { RelayProcess } from './helpers/processes.js';

const MiB = 1024 * 1024;

describe('memory samplers', { timeout: 60_000 }, () => {
  let relay: RelayProcess;
  before(async () => {
    relay = await startRelay({ nodeId: 'sampled' });
  });
  after(async () => {
    await relay.stop();
  });

  it('reads a real process: RSS without file-backed pages follows what it allocates', async () => {
    const sampler = processSampler(process.pid);
    const before = await sampler.sample();
    const held = Buffer.alloc(64 * MiB, 1); // touched, so resident
    const during = await sampler.sample();
    assert.ok(
      during.bytes - before.bytes > 48 * MiB,
      `grew ${(during.bytes - before.bytes) / MiB} MiB`,
    );
    assert.ok(during.detail.rss! >= during.detail.rssAnon!);
    assert.equal(held[0], 1);
  });

  it("reads the relay's own memory metric from its Prometheus endpoint", async () => {
    const viaMetrics = await prometheusSampler(
      `${relay.url}/metrics`,
      'relay_rss_anon_bytes',
    ).sample();
    const viaProc = await processSampler(relay.pid).sample();
    assert.ok(viaMetrics.bytes > 10 * MiB);
    // Two readings of one process moments apart: the same order of magnitude.
    assert.ok(Math.abs(viaMetrics.bytes - viaProc.bytes) < 0.5 * viaProc.bytes);
  });

  it('fails with a clear error for an unreadable source', async () => {
    await assert.rejects(
      processSampler(2 ** 22 + 7).sample(),
      (err: Error) => err instanceof SamplerError && /cannot read \/proc\//.test(err.message),
    );
    await assert.rejects(
      prometheusSampler(`${relay.url}/metrics`, 'no_such_metric').sample(),
      /exports no metric no_such_metric/,
    );
    await assert.rejects(
      prometheusSampler('http://127.0.0.1:1/metrics', 'x').sample(),
      /cannot read http:\/\/127\.0\.0\.1:1/,
    );
  });
});

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
