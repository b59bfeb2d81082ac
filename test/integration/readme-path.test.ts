import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { finalizeEvent, generateSecretKey } from 'nostr-tools/pure';
import type { ThirdPartyRelay } from '../../src/bench/run/relay-process.js';
import { PROJECT_ROOT } from '../../src/harness/paths.js';
import { freeLoopbackPort } from '../../src/harness/ports.js';
import { sluice } from '../helpers/cli.js';
import { NostrClient } from '../helpers/gateway.js';
import { spawnSluice } from '../helpers/processes.js';
import type { SluiceProcess } from '../helpers/processes.js';
import { relaysUnderSuite } from '../helpers/third-party-relays.js';

/*
 * The newcomer's path, as the README writes it: the commands of "Putting sluice in front of
 * a relay", read from README.md and run, with a relay people run (nostr-rs-relay, then a
 * khatru relay, each built by the harness) in place of the reference relays, and only
 * addresses rewritten to free
 * loopback ports. The set-up ("the two commands") is what runs this suite. A client then
 * writes an event through the gateway and reads it back.
 */

/** The commands of the README's first shell block under `heading`, comments dropped. */
function readmeCommands(readme: string, heading: string): string[] {
  const section = readme.split(`\n## ${heading}\n`)[1];
  assert.ok(section, `README.md has no section "${heading}"`);
  const block = /```sh\n([\s\S]*?)```/.exec(section)?.[1];
  assert.ok(block, `"${heading}" has no sh block`);
  return block
    .split('\n')
    .map((line) => line.replace(/\s+#.*$/, '').trim())
    .filter((line) => line && !line.startsWith('#'));
}

for (const suite of relaysUnderSuite()) {
  describe(
    `README: putting sluice in front of a relay (${suite.impl})`,
    { timeout: 240_000, skip: suite.skip },
    () => {
      // Made when the suite runs (not when it is skipped), removed after it.
      let work = '';
      let runDir = '';
      before(() => {
        work = mkdtempSync(path.join(tmpdir(), `sluice-readme-${suite.impl}-`));
        runDir = path.join(work, 'run');
      });
      const relays: ThirdPartyRelay[] = [];
      let gateway: SluiceProcess | undefined;

      after(async () => {
        await gateway?.stop();
        for (const relay of relays) await relay.stop();
        sluice(['valkey', 'stop', '--all'], { ...process.env, SLUICE_RUN_DIR: runDir });
        rmSync(work, { recursive: true, force: true });
      });

      it('runs as written, and a Nostr client writes and reads through it', async () => {
        const readme = readFileSync(path.join(PROJECT_ROOT, 'README.md'), 'utf8');
        const commands = readmeCommands(readme, 'Putting sluice in front of a relay');
        // The shape this test maps onto real processes: a README change must come here too.
        assert.equal(commands.length, 5, commands.join('\n'));
        const [valkey, relayA, relayB, token, gw] = commands as [
          string,
          string,
          string,
          string,
          string,
        ];
        assert.equal(valkey, 'node dist/src/cli.js valkey start');
        assert.match(relayA, /^node dist\/src\/cli\.js relay --port 7001 --node-id relay-a &$/);
        assert.match(relayB, /^node dist\/src\/cli\.js relay --port 7002 --node-id relay-b &$/);
        assert.equal(token, 'export SLUICE_ADMIN_TOKEN=$(openssl rand -hex 32)');
        assert.equal(gw, 'node dist/src/cli.js gateway --config examples/gateway.yaml');

        const env: NodeJS.ProcessEnv = { ...process.env, SLUICE_RUN_DIR: runDir };
        // 1. Valkey, on a free port instead of 6379 (which may be someone else's).
        const valkeyPort = await freeLoopbackPort();
        const started = sluice([...valkey.split(' ').slice(2), '--port', String(valkeyPort)], env);
        assert.equal(started.status, 0, started.stderr);
        // 2. Two relay nodes: the third-party relay where the README starts reference relays.
        for (const id of ['relay-a', 'relay-b']) {
          const dir = path.join(work, id);
          execFileSync('mkdir', ['-p', dir]);
          relays.push(await suite.kind.start(dir, () => undefined));
        }
        // 3. The admin token, as the shell would make it.
        env.SLUICE_ADMIN_TOKEN = execFileSync('sh', ['-c', 'openssl rand -hex 32'], {
          encoding: 'utf8',
        }).trim();
        // 4. The gateway with the example file, from the checkout; only addresses (and one
        //    process rather than one per core) given on top, and the health check on the
        //    relay's root, as the README says for a relay without /healthz.
        const args = gw.split(' ').slice(2);
        gateway = await spawnSluice(
          [
            ...args,
            '--port',
            '0',
            '--admin-port',
            '0',
            '--valkey-nodes',
            `127.0.0.1:${valkeyPort}`,
            '--upstream',
            `relay-a=${relays[0]!.url}`,
            '--upstream',
            `relay-b=${relays[1]!.url}`,
            '--set',
            'healthCheck.path=/',
            '--workers',
            '1',
          ],
          { env: { ...env, SLUICE_RUN_DIR: runDir }, readyTimeoutMs: 30_000 },
        );

        const client = await NostrClient.connect(gateway.url);
        try {
          const event = finalizeEvent(
            {
              kind: 1,
              created_at: Math.floor(Date.now() / 1000),
              tags: [],
              content: 'hello via sluice',
            },
            generateSecretKey(),
          );
          const ok = await client.okFor(event.id, ['EVENT', event]);
          assert.equal(ok[2], true, `the relay refused it: ${JSON.stringify(ok)}`);
          client.send(['REQ', 'mine', { ids: [event.id] }]);
          const got = await client.until((msgs) =>
            msgs.some((m) => m[0] === 'EVENT' && m[1] === 'mine'),
          );
          const echoed = got.find((m) => m[0] === 'EVENT' && m[1] === 'mine')!;
          assert.equal((echoed[2] as { content: string }).content, 'hello via sluice');
        } finally {
          client.ws.close();
        }
      });
    },
  );
}
