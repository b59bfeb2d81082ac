import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { WebSocket } from 'ws';
import { PROJECT_ROOT } from '../../src/harness/paths.js';
import { freeLoopbackPort } from '../../src/harness/ports.js';
import { killOnExit } from '../../src/harness/processes.js';
import { startGateway, request } from '../helpers/gateway.js';
import type { GatewayUnderTest } from '../helpers/gateway.js';
import { startFeed, startRelay, stopAll } from '../helpers/processes.js';
import type { SluiceProcess } from '../helpers/processes.js';

/*
 * The alert and recording rules shipped in docker/prometheus/rules, read by the real
 * Prometheus tools (Debian's `prometheus` package: scripts/test.sh installs it), and a real
 * Prometheus scraping a running gateway, feed and relay: every series the Grafana dashboard
 * charts must exist there, so the dashboard cannot name a metric nothing exports.
 */

const RULES = path.join(PROJECT_ROOT, 'docker', 'prometheus', 'rules');
const RULE_FILES = ['sluice-alerts.yml', 'sluice-recording.yml'];
const DASHBOARD = path.join(PROJECT_ROOT, 'docker', 'grafana', 'dashboards', 'sluice.json');

function which(binary: string): string | undefined {
  const r = spawnSync('sh', ['-c', `command -v ${binary}`], { encoding: 'utf8' });
  return r.status === 0 ? r.stdout.trim() : undefined;
}
const promtool = which('promtool');
const prometheus = which('prometheus');
const MISSING = 'Prometheus is not installed (apt-get install prometheus; scripts/test.sh does it)';

describe('shipped Prometheus rules', { timeout: 60_000 }, () => {
  it('pass `promtool check rules`', { skip: promtool ? false : MISSING }, () => {
    const r = spawnSync(promtool!, ['check', 'rules', ...RULE_FILES], {
      cwd: RULES,
      encoding: 'utf8',
      timeout: 30_000,
    });
    assert.equal(r.status, 0, r.stdout + r.stderr);
    assert.match(r.stdout, /SUCCESS: 4 rules found[\s\S]*SUCCESS: 4 rules found/);
  });

  it(
    'pass their unit tests (`promtool test rules`): each alert fires when it should, not before',
    {
      skip: promtool ? false : MISSING,
    },
    () => {
      const r = spawnSync(promtool!, ['test', 'rules', 'sluice-alerts.test.yml'], {
        cwd: RULES,
        encoding: 'utf8',
        timeout: 30_000,
      });
      assert.equal(r.status, 0, r.stdout + r.stderr);
      const tested = readFileSync(path.join(RULES, 'sluice-alerts.test.yml'), 'utf8');
      for (const alert of [
        'SluiceRelayNodeEmergency',
        'SluiceStoreDownInsuranceServing',
        'SluiceInternalErrors',
        'SluiceFeedStale',
      ]) {
        assert.match(tested, new RegExp(`alertname: ${alert}`), `${alert} has no unit test`);
      }
    },
  );
});

/** The dashboard's queries, and the metric names they select. */
function dashboardQueries(): string[] {
  interface Panel {
    targets?: { expr?: string }[];
    panels?: Panel[];
  }
  const dash = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as { panels?: Panel[] };
  const panels = (dash.panels ?? []).flatMap((p) => [p, ...(p.panels ?? [])]);
  return panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr ?? '')).filter(Boolean);
}

function metricNames(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ');
  const keywords = new Set(['by', 'without', 'on', 'ignoring', 'bool', 'and', 'or', 'unless']);
  const names: string[] = [];
  for (const m of bare.matchAll(/[A-Za-z_:][A-Za-z0-9_:]*/g)) {
    const rest = bare.slice(m.index + m[0].length).trimStart();
    if (!rest.startsWith('(') && !keywords.has(m[0])) names.push(m[0]);
  }
  return names;
}

async function getJson<T>(url: string): Promise<T> {
  const res = await request(url, { timeoutMs: 5_000 });
  if (res.status !== 200) throw new Error(`GET ${url}: ${res.status} ${res.body}`);
  return (JSON.parse(res.body) as { data: T }).data;
}

/** A relay-shaped server that is healthy but drops every other request: upstream errors. */
async function brokenRelay(): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer((req, res) => {
    if (req.url === '/healthz') res.end('ok');
    else req.socket.destroy();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

describe(
  'a real Prometheus scrapes a gateway, a feed and a relay',
  {
    timeout: 180_000,
    skip: prometheus ? false : MISSING,
  },
  () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'sluice-prometheus-'));
    let relay: SluiceProcess | undefined;
    let feed: SluiceProcess | undefined;
    let gw: GatewayUnderTest | undefined;
    let broken: Awaited<ReturnType<typeof brokenRelay>> | undefined;
    let prom: ChildProcess | undefined;
    let promUrl = '';
    let promLog = '';

    before(async () => {
      relay = await startRelay({ nodeId: 'relay-a' });
      broken = await brokenRelay();
      feed = await startFeed({
        nodeId: 'relay-a',
        relayUrl: relay.url,
        targetBytes: '1GiB',
        tickMs: 200,
        client: 'iovalkey',
        mode: 'standalone',
      });
      gw = await startGateway(
        'iovalkey',
        'standalone',
        [
          { id: 'relay-a', url: relay.url },
          { id: 'relay-b', url: broken.url },
        ],
        // Its writes are stand-ins ('{}'), not events: no event policy on /events here.
        { routing: 'round-robin', pressure: { enabled: true }, nostr: { httpEventPaths: [] } },
      );
      const port = await freeLoopbackPort();
      promUrl = `http://127.0.0.1:${port}`;
      const target = (url: string) => new URL(url).host;
      const config = {
        global: { scrape_interval: '1s', evaluation_interval: '1s' },
        rule_files: RULE_FILES.map((f) => path.join(RULES, f)),
        scrape_configs: [
          { job_name: 'sluice-gateway', static_configs: [{ targets: [target(gw.adminUrl)] }] },
          {
            job_name: 'sluice-feed',
            static_configs: [{ targets: [target(feed.url)], labels: { node: 'relay-a' } }],
          },
          {
            job_name: 'sluice-relay',
            static_configs: [{ targets: [target(relay.url)], labels: { node: 'relay-a' } }],
          },
        ],
      };
      // JSON is YAML: Prometheus reads it as its configuration file.
      writeFileSync(path.join(dir, 'prometheus.yml'), JSON.stringify(config));
      prom = spawn(
        prometheus!,
        [
          `--config.file=${path.join(dir, 'prometheus.yml')}`,
          `--storage.tsdb.path=${path.join(dir, 'data')}`,
          `--web.listen-address=127.0.0.1:${port}`,
          '--web.enable-lifecycle',
        ],
        { stdio: ['ignore', 'ignore', 'pipe'] },
      );
      killOnExit(prom);
      prom.stderr!.setEncoding('utf8');
      prom.stderr!.on('data', (chunk: string) => (promLog = (promLog + chunk).slice(-20_000)));
      const deadline = Date.now() + 30_000;
      for (;;) {
        const ready = await request(`${promUrl}/-/ready`, { timeoutMs: 2_000 }).catch(() => null);
        if (ready?.status === 200) break;
        if (prom.exitCode !== null || Date.now() > deadline) {
          throw new Error(`Prometheus did not become ready:\n${promLog}`);
        }
        await sleep(200);
      }
    });

    after(async () => {
      if (prom && prom.exitCode === null) {
        const exited = new Promise((resolve) => prom!.once('exit', resolve));
        prom.kill('SIGTERM');
        await Promise.race([exited, sleep(10_000).then(() => prom!.kill('SIGKILL'))]);
      }
      await stopAll(gw?.proc, feed, relay);
      await broken?.close();
      rmSync(dir, { recursive: true, force: true });
    });

    it('loads the shipped rules and scrapes every target', async () => {
      const groups = await getJson<{
        groups: { rules: { name: string; type: string; health: string }[] }[];
      }>(`${promUrl}/api/v1/rules`);
      const rules = groups.groups.flatMap((g) => g.rules);
      assert.equal(rules.filter((r) => r.type === 'alerting').length, 4);
      assert.equal(rules.filter((r) => r.type === 'recording').length, 4);
      const deadline = Date.now() + 30_000;
      let health: string[] = [];
      while (Date.now() < deadline) {
        const targets = await getJson<{ activeTargets: { scrapePool: string; health: string }[] }>(
          `${promUrl}/api/v1/targets`,
        );
        health = targets.activeTargets.map((t) => `${t.scrapePool}=${t.health}`).sort();
        if (health.length === 3 && health.every((h) => h.endsWith('=up'))) return;
        await sleep(500);
      }
      assert.fail(`targets not all up: ${health.join(', ')}`);
    });

    it('holds a series for every metric the Grafana dashboard charts, and runs its queries', async () => {
      // Traffic that makes the labelled series exist: writes (some to the broken node),
      // reads, and WebSocket frames.
      // Round-robin: consecutive writes take both nodes, relay-b failing each one it gets.
      for (let i = 0; i < 6; i++) {
        await request(`${gw!.url}/events`, { method: 'POST', body: '{}' }).catch(() => undefined);
      }
      await request(`${gw!.url}/events?limit=1`).catch(() => undefined);
      // Round-robin may pick the broken node for the upgrade (a 502) until its health check
      // takes it out: the next pick is the other node.
      let ws: WebSocket | undefined;
      for (let attempt = 1; !ws; attempt++) {
        const socket = new WebSocket(gw!.url.replace(/^http/, 'ws'));
        const opened = await new Promise<boolean>((resolve, reject) => {
          socket.once('open', () => resolve(true));
          socket.once('error', (err) => (attempt < 4 ? resolve(false) : reject(err)));
        });
        if (opened) ws = socket;
      }
      ws.send(JSON.stringify(['REQ', 'sub', { limit: 1 }]));

      const queries = dashboardQueries();
      const names = [...new Set(queries.flatMap(metricNames))].sort();
      assert.ok(names.length >= 10, `the dashboard names ${names.length} metrics`);
      const deadline = Date.now() + 60_000;
      let missing = names;
      while (Date.now() < deadline) {
        const found = await Promise.all(
          missing.map(async (name) => {
            const result = await getJson<{ result: unknown[] }>(
              `${promUrl}/api/v1/query?query=${encodeURIComponent(`count(${name})`)}`,
            );
            return result.result.length > 0;
          }),
        );
        missing = missing.filter((_, i) => !found[i]);
        if (missing.length === 0) break;
        await sleep(1_000);
      }
      ws.close();
      const exposed = (await request(`${gw!.adminUrl}/metrics`)).body.split('\n');
      assert.deepEqual(
        missing,
        [],
        'metrics the dashboard charts that Prometheus never saw; the gateway shows:\n' +
          exposed.filter((l) => missing.some((m) => l.includes(m))).join('\n'),
      );
      // The queries themselves, as Grafana sends them ($__rate_interval: a few scrapes).
      for (const expr of queries) {
        const q = expr.replaceAll('$__rate_interval', '10s');
        const res = await request(`${promUrl}/api/v1/query?query=${encodeURIComponent(q)}`, {
          timeoutMs: 5_000,
        });
        assert.equal(res.status, 200, `${q}: ${res.body}`);
      }
    });
  },
);
