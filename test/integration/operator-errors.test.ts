import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { freeLoopbackPort } from '../../src/harness/ports.js';
import { sluice } from '../helpers/cli.js';
import { standaloneNodes } from '../helpers/env.js';
import { ADMIN_TOKEN, request, startGateway } from '../helpers/gateway.js';

/*
 * When sluice will not start, or will not take a new configuration, the operator reads one
 * line that names the cause and the fix (docs/OPERATIONS.md, "When it will not start").
 */

const dir = mkdtempSync(path.join(tmpdir(), 'sluice-operator-errors-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const valkey = () => standaloneNodes().map((n) => `${n.host}:${n.port}`);

function configFile(name: string, config: Record<string, unknown>): string {
  const file = path.join(dir, name);
  writeFileSync(
    file,
    JSON.stringify({
      listen: { port: 0 },
      admin: { port: 0, token: ADMIN_TOKEN },
      valkey: { client: 'iovalkey', nodes: valkey(), connectTimeoutMs: 1000 },
      upstreams: [{ id: 'relay-a', url: 'http://127.0.0.1:9' }],
      workers: 1,
      logging: { level: 'error' },
      ...config,
    }),
  );
  return file;
}

/** The environment without the caller's SLUICE_* settings. */
function env(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('SLUICE_')));
}

/** The line sluice printed about why it stopped. */
function refusal(stderr: string): string {
  const lines = stderr.split('\n').filter((l) => l.startsWith('sluice: '));
  assert.equal(lines.length, 1, `one line starting "sluice: ", got:\n${stderr}`);
  return lines[0]!;
}

describe('when it will not start', { timeout: 60_000 }, () => {
  it('a configuration without an admin token or relays: each missing key, and how to set it', () => {
    const file = path.join(dir, 'empty.yaml');
    writeFileSync(file, 'listen: { port: 0 }\n');
    const r = sluice(['gateway', '--config', file], env());
    assert.equal(r.status, 1);
    const line = refusal(r.stderr);
    assert.match(line, /invalid gateway configuration .*fix the keys below/);
    assert.match(line, /sluice config check/);
    assert.match(r.stderr, /^ {2}admin: is required \(admin\.token\): set SLUICE_ADMIN_TOKEN/m);
    assert.match(r.stderr, /^ {2}upstreams: is required: .*--upstream ID=URL/m);
  });

  it('a configuration file that is not there', () => {
    const r = sluice(['gateway', '--config', path.join(dir, 'nowhere.yaml')], env());
    assert.equal(r.status, 1);
    assert.match(
      refusal(r.stderr),
      /cannot read config file .*nowhere\.yaml: no such file; give --config the path/,
    );
  });

  it('a port another process holds', async () => {
    const holder = net.createServer();
    await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
    const { port } = holder.address() as net.AddressInfo;
    try {
      const r = sluice(
        ['gateway', '--config', configFile('busy.json', {}), '--port', String(port)],
        env(),
      );
      assert.equal(r.status, 1);
      assert.match(
        refusal(r.stderr),
        new RegExp(
          `port ${port} on 127\\.0\\.0\\.1 is already in use: stop what holds it, or choose another port \\(listen\\.port / --port`,
        ),
      );
    } finally {
      await new Promise((resolve) => holder.close(resolve));
    }
  });

  it('a Valkey that cannot be reached, for the gateway and for a feed', async () => {
    const nobody = `127.0.0.1:${await freeLoopbackPort()}`;
    const file = configFile('no-valkey.json', {
      valkey: { client: 'iovalkey', nodes: [nobody], connectTimeoutMs: 1000 },
    });
    const r = sluice(['gateway', '--config', file], env());
    assert.equal(r.status, 1);
    const line = refusal(r.stderr);
    assert.match(line, new RegExp(`cannot connect iovalkey \\(standalone\\) to ${nobody}`));
    assert.match(
      line,
      /start Valkey there .*valkey\.nodes \(--valkey-nodes, SLUICE__valkey__nodes\)/,
    );
    const feed = sluice(
      [
        'feed',
        '--node-id',
        'relay-a',
        '--pid',
        String(process.pid),
        '--target-bytes',
        '1GiB',
        '--valkey-client',
        'iovalkey',
        '--valkey-nodes',
        nobody,
      ],
      env(),
    );
    assert.equal(feed.status, 1);
    assert.match(refusal(feed.stderr), /cannot connect .*: start Valkey there/);
  });
});

describe('a feed whose memory source is not there', { timeout: 60_000 }, () => {
  it('names the source and what to give instead', () => {
    // A process id that cannot be running: above the kernel's pid_max (at most 2^22).
    const r = sluice(
      [
        'feed',
        '--node-id',
        'relay-a',
        '--pid',
        String(2 ** 23),
        '--target-bytes',
        '1GiB',
        '--valkey-client',
        'iovalkey',
        '--valkey-nodes',
        valkey().join(','),
      ],
      env(),
    );
    assert.equal(r.status, 1);
    assert.match(
      refusal(r.stderr),
      /cannot read \/proc\/8388608\/status: .*: give --pid the id of the relay's running process/,
    );
  });
});

describe('when a reload is refused', { timeout: 60_000 }, () => {
  it('names the key at fault and the fix in one log line, and keeps serving', async () => {
    const gw = await startGateway(
      'iovalkey',
      'standalone',
      [{ id: 'relay-a', url: 'http://127.0.0.1:9' }],
      { logging: { level: 'info' } },
    );
    const good = (await import('node:fs')).readFileSync(gw.configFile, 'utf8');
    const broken = JSON.parse(good) as Record<string, Record<string, unknown>>;
    broken.quotas = { inMemoryBlok: true };
    writeFileSync(gw.configFile, JSON.stringify(broken));
    process.kill(gw.proc.pid, 'SIGHUP');
    const deadline = Date.now() + 15_000;
    let line: string | undefined;
    while (!line && Date.now() < deadline) {
      line = gw.proc
        .output()
        .split('\n')
        .find((l) => l.includes('reload rejected'));
      if (!line) await sleep(100);
    }
    assert.ok(line, `no reload refusal logged:\n${gw.proc.output()}`);
    const { msg } = JSON.parse(line) as { msg: string };
    assert.match(msg, /unknown key quotas\.inMemoryBlok: did you mean inMemoryBlock\?/);
    assert.match(msg, /the running configuration stays: fix .*gateway\.json and send SIGHUP again/);
    const ready = await request(`${gw.adminUrl}/healthz`);
    assert.equal(ready.status, 200);
    await gw.proc.stop();
  });
});
