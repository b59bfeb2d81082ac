import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { CLIENT_KINDS, StoreError, clientKey, createStore } from '../../src/store/index.js';
import type { Store } from '../../src/store/index.js';
import { startInstance, stopInstance } from '../../src/valkey/embedded.js';
import type { InstanceSelector } from '../../src/valkey/embedded.js';
import { venvDir } from '../../src/harness/paths.js';
import { unusedPort } from '../helpers/env.js';

const quiet = { info: () => undefined, warn: () => undefined };

describe('a store failure is an error, never a rate-limit rejection', { timeout: 60_000 }, () => {
  let scratch: string;
  let env: NodeJS.ProcessEnv;
  let sel: InstanceSelector;
  const stores: Store[] = [];

  before(async () => {
    scratch = mkdtempSync(path.join(tmpdir(), 'sluice-fail-'));
    env = { ...process.env, SLUICE_RUN_DIR: scratch, SLUICE_VENV: venvDir() };
    sel = { topology: 'standalone', port: await unusedPort() };
    await startInstance(sel, quiet, env);
    for (const client of CLIENT_KINDS) {
      stores.push(
        await createStore({
          client,
          nodes: [{ host: '127.0.0.1', port: sel.port }],
          timeouts: { connectMs: 1000, commandMs: 300 },
        }),
      );
    }
  });

  after(async () => {
    await Promise.all(stores.map((s) => s.close().catch(() => undefined)));
    await stopInstance(sel, quiet, env);
    rmSync(scratch, { recursive: true, force: true });
  });

  it('consume rejects with StoreError for each client once Valkey is gone', async () => {
    const limiters = stores.map((s) =>
      s.limiter({ keyPrefix: 'test:down', points: 1, duration: 10 }),
    );
    const key = clientKey('client-down');
    for (const limiter of limiters) await limiter.consume(key);
    await stopInstance(sel, quiet, env);
    for (const [i, limiter] of limiters.entries()) {
      await assert.rejects(limiter.consume(key), (err: Error) => {
        assert.ok(err instanceof StoreError, `${CLIENT_KINDS[i]}: got ${err.name}: ${err.message}`);
        return true;
      });
    }
  });
});
