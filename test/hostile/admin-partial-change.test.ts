/**
 * Hole: a refused POST /admin/flow-control used to leave the parts checked before the
 * refusal applied (tiers, node multipliers, adaptation), so an operator who read "400" or
 * "503" believed nothing had changed. The change is now validated whole, the one step that
 * can fail (saving law parameters to Valkey) runs next, and only then the in-memory parts.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startInstance, stopInstance } from '../../src/valkey/embedded.js';
import type { InstanceSelector } from '../../src/valkey/embedded.js';
import { venvDir } from '../../src/harness/paths.js';
import { unusedPort } from '../helpers/env.js';
import { admin, startGateway } from '../helpers/gateway.js';
import type { GatewayUnderTest } from '../helpers/gateway.js';
import { startRelay } from '../helpers/processes.js';
import type { RelayProcess } from '../helpers/processes.js';

const quiet = { info: () => undefined, warn: () => undefined };

interface FlowControl {
  tiers: Record<string, unknown>;
  nodes: Record<string, { multiplier: number; override: boolean }>;
  adaptation: { enabled: boolean };
}

/** What a change could alter: tiers, per-node overrides, adaptation. */
async function appliedState(gw: GatewayUnderTest) {
  const res = await admin(gw, 'GET', '/admin/flow-control');
  assert.equal(res.status, 200, res.body);
  const state = JSON.parse(res.body) as FlowControl;
  return {
    tiers: state.tiers,
    overrides: Object.fromEntries(
      Object.entries(state.nodes).map(([id, n]) => [id, n.override ? n.multiplier : null]),
    ),
    adaptation: state.adaptation.enabled,
  };
}

describe('POST /admin/flow-control: all or nothing', { timeout: 90_000 }, () => {
  let scratch: string;
  let env: NodeJS.ProcessEnv;
  let valkey: InstanceSelector;
  let relay: RelayProcess;
  let gw: GatewayUnderTest;

  before(async () => {
    scratch = mkdtempSync(path.join(tmpdir(), 'sluice-partial-'));
    env = { ...process.env, SLUICE_RUN_DIR: scratch, SLUICE_VENV: venvDir() };
    valkey = { topology: 'standalone', port: await unusedPort() };
    await startInstance(valkey, quiet, env);
    relay = await startRelay({ nodeId: 'relay-a' });
    gw = await startGateway(
      'ioredis',
      'standalone',
      [
        { id: 'relay-a', url: relay.url },
        { id: 'relay-b', url: relay.url },
      ],
      { quotas: { keyPrefix: 'partial' } },
      [`127.0.0.1:${valkey.port}`],
    );
  });

  after(async () => {
    await gw?.proc.stop();
    await relay?.stop();
    await stopInstance(valkey, quiet, env);
    rmSync(scratch, { recursive: true, force: true });
  });

  /** A change whose tier, node and adaptation parts are valid on their own. */
  async function validParts() {
    const { adaptation } = await appliedState(gw);
    return {
      tiers: { default: { write: { points: 7, windowSec: 60 } } },
      nodes: { 'relay-a': { multiplier: 0.3 } },
      adaptation: { enabled: !adaptation },
    };
  }

  it('applies nothing when the law parameters are refused', async () => {
    const before = await appliedState(gw);
    const res = await admin(gw, 'POST', '/admin/flow-control', {
      ...(await validParts()),
      law: { params: { uLo: 0.9, uHi: 0.5 } },
    });
    assert.equal(res.status, 400, res.body);
    assert.deepEqual(await appliedState(gw), before);
  });

  it('applies nothing when the law names an unknown node', async () => {
    const before = await appliedState(gw);
    const res = await admin(gw, 'POST', '/admin/flow-control', {
      ...(await validParts()),
      law: { nodes: ['relay-a', 'relay-z'], params: { uLo: 0.6 } },
    });
    assert.equal(res.status, 400, res.body);
    assert.match(res.body, /relay-z/);
    assert.deepEqual(await appliedState(gw), before);
    const law = JSON.parse((await admin(gw, 'GET', '/admin/flow-control/law')).body) as {
      params: Record<string, unknown>;
    };
    assert.deepEqual(law.params['relay-a'], {}, 'no node got the parameters either');
  });

  it('applies nothing when the law parameters cannot be saved, and all once they can', async () => {
    const before = await appliedState(gw);
    const change = { ...(await validParts()), law: { params: { uLo: 0.6 } } };
    await stopInstance(valkey, quiet, env);
    const refused = await admin(gw, 'POST', '/admin/flow-control', change);
    assert.equal(refused.status, 503, refused.body);
    assert.match(refused.body, /not applied/);
    assert.deepEqual(await appliedState(gw), before);

    await startInstance(valkey, quiet, env);
    const deadline = Date.now() + 20_000;
    let res = await admin(gw, 'POST', '/admin/flow-control', change);
    while (res.status === 503 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 200));
      res = await admin(gw, 'POST', '/admin/flow-control', change);
    }
    assert.equal(res.status, 200, res.body);
    const after = await appliedState(gw);
    assert.deepEqual(after.tiers.default, { write: { points: 7, windowSec: 60 } });
    assert.equal(after.overrides['relay-a'], 0.3);
    assert.equal(after.adaptation, change.adaptation.enabled);
  });
});
