import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { PROJECT_ROOT } from '../../src/harness/paths.js';
import { killOnExit } from '../../src/harness/processes.js';
import { parseReadyLine } from '../../src/util/ready-line.js';
import type { ReadyInfo } from '../../src/util/ready-line.js';
import { standaloneNodes } from '../helpers/env.js';
import { request } from '../helpers/gateway.js';

/*
 * sluice as an operator installs it: `npm pack`, the tarball installed into an empty folder
 * (its dependencies from the npm registry), and the gateway, a relay and a feed run from that
 * folder with nothing else of the repository. The Dockerfiles install the same package.
 */

const work = mkdtempSync(path.join(tmpdir(), 'sluice-package-'));
const install = path.join(work, 'install');
const TOKEN = 'an-operator-token-0123456789abcdef';

/** The environment of an operator's shell: no SLUICE_* of the test run, no NODE_PATH. */
function operatorEnv(): NodeJS.ProcessEnv {
  const env = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !k.startsWith('SLUICE_') && k !== 'NODE_PATH'),
  );
  return { ...env, SLUICE_RUN_DIR: path.join(work, 'run') };
}

function run(command: string, args: string[], cwd: string, timeoutMs = 60_000) {
  const r = spawnSync(command, args, {
    cwd,
    env: operatorEnv(),
    encoding: 'utf8',
    timeout: timeoutMs,
  });
  assert.equal(r.status, 0, `${command} ${args.join(' ')}:\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

interface Started {
  child: ChildProcess;
  ready: ReadyInfo;
  output(): string;
}

/** The installed `sluice` (what npx runs), in the background until its ready line. */
async function startInstalled(args: string[]): Promise<Started> {
  const bin = path.join(install, 'node_modules', '.bin', 'sluice');
  const child = spawn(bin, args, {
    cwd: install,
    env: operatorEnv(),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  killOnExit(child);
  let out = '';
  child.stdout.setEncoding('utf8');
  child.stderr.setEncoding('utf8');
  child.stdout.on('data', (c: string) => (out += c));
  child.stderr.on('data', (c: string) => (out += c));
  const deadline = Date.now() + 20_000;
  for (;;) {
    const ready = out
      .split('\n')
      .map(parseReadyLine)
      .find((info) => info !== undefined);
    if (ready) return { child, ready, output: () => out };
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`sluice ${args.join(' ')} did not start:\n${out}`);
    }
    await sleep(100);
  }
}

async function stop(p: Started | undefined): Promise<void> {
  if (!p || p.child.exitCode !== null) return;
  const exited = new Promise((resolve) => p.child.once('exit', resolve));
  p.child.kill('SIGTERM');
  await Promise.race([exited, sleep(10_000).then(() => p.child.kill('SIGKILL'))]);
}

describe('the npm package', { timeout: 300_000 }, () => {
  let tarball = '';
  const started: Started[] = [];

  before(() => {
    // dist/ is what this test runs from, so it is built: pack it as is (prepack would
    // rebuild it under the running suite).
    const out = run('npm', ['pack', '--ignore-scripts', '--pack-destination', work], PROJECT_ROOT);
    tarball = path.join(work, out.trim().split('\n').at(-1)!);
    run('mkdir', ['-p', install], work);
    run('npm', ['install', '--no-audit', '--no-fund', '--omit=dev', tarball], install, 240_000);
  });

  after(async () => {
    for (const p of started.reverse()) await stop(p);
    rmSync(work, { recursive: true, force: true });
  });

  it('builds dist/ when packed, and holds the CLI, not the sources or tests', () => {
    const pkg = JSON.parse(readFileSync(path.join(PROJECT_ROOT, 'package.json'), 'utf8')) as {
      scripts: Record<string, string>;
      bin: Record<string, string>;
    };
    assert.match(pkg.scripts.prepack ?? '', /npm run build/);
    assert.equal(pkg.bin.sluice, 'dist/src/cli.js');
    const files = run('tar', ['tzf', tarball], work).split('\n').filter(Boolean);
    assert.ok(files.includes('package/dist/src/cli.js'));
    assert.ok(files.includes('package/docs/CONFIGURATION.md'));
    assert.ok(files.includes('package/examples/gateway.yaml'));
    assert.deepEqual(
      files.filter((f) => /^package\/(src|test|dist\/test|scripts|\.run)\//.test(f)),
      [],
      'the package carries only the built CLI and its documents',
    );
    assert.deepEqual(readdirSync(install).sort(), [
      'node_modules',
      'package-lock.json',
      'package.json',
    ]);
  });

  it('`npx sluice config check` validates a file from the installed package', () => {
    const file = path.join(install, 'check.yaml');
    writeFileSync(
      file,
      `admin: { token: ${TOKEN} }\nupstreams: [{ id: relay-a, url: "http://127.0.0.1:1" }]\n`,
    );
    const out = run('npx', ['--no-install', 'sluice', 'config', 'check', 'check.yaml'], install);
    assert.match(out, /check\.yaml: valid/);
    assert.ok(!out.includes(TOKEN));
  });

  it('runs a relay, a gateway in front of it and a feed beside it, from the install folder', async () => {
    const valkey = standaloneNodes()
      .map((n) => `${n.host}:${n.port}`)
      .join(',');
    const relay = await startInstalled([
      'relay',
      '--port',
      '0',
      '--node-id',
      'relay-a',
      '--data-dir',
      path.join(work, 'relay'),
    ]);
    started.push(relay);
    const relayUrl = relay.ready.url;
    writeFileSync(
      path.join(install, 'gateway.yaml'),
      [
        'listen: { port: 0 }',
        `admin: { port: 0, token: ${TOKEN} }`,
        `valkey: { client: iovalkey, nodes: ["${valkey}"] }`,
        `upstreams: [{ id: relay-a, url: "${relayUrl}" }]`,
        'pressure: { enabled: true }',
        'workers: 1',
      ].join('\n'),
    );
    const gw = await startInstalled(['gateway', '--config', 'gateway.yaml']);
    started.push(gw);
    const { url, admin: adminUrl } = gw.ready;
    assert.ok(adminUrl, 'the gateway names its admin listener');
    // Through the gateway to the relay: the relay's own answer comes back.
    const health = await request(`${url}/healthz`);
    assert.equal(health.status, 200, health.body);
    assert.match(health.body, /relay-a/);
    const feed = await startInstalled([
      'feed',
      '--node-id',
      'relay-a',
      '--pid',
      String(relay.child.pid),
      '--target-bytes',
      '1GiB',
      '--tick-ms',
      '200',
      '--valkey-client',
      'iovalkey',
      '--valkey-nodes',
      valkey,
    ]);
    started.push(feed);
    // The gateway follows the installed feed through Valkey.
    const deadline = Date.now() + 20_000;
    let metrics = '';
    while (Date.now() < deadline) {
      metrics = (await request(`${adminUrl}/metrics`)).body;
      if (/sluice_multiplier\{node="relay-a",source="feed"\}/.test(metrics)) return;
      await sleep(200);
    }
    assert.fail(
      `the gateway never applied the feed's multiplier:\n${metrics
        .split('\n')
        .filter((l) => l.startsWith('sluice_multiplier'))
        .join('\n')}\n${feed.output()}`,
    );
  });
});
