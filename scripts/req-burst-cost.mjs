#!/usr/bin/env node
/* global console, process, setTimeout, clearTimeout */
// CPU per stored EVENT that a REQ's answer carries through the gateway: clients, each from a
// loopback address of its own, ask a relay holding --limit events for all of them (a REQ, its
// events, EOSE, CLOSE) over and over through a gateway with its shipped defaults. The gateway's,
// the relay's and the load's CPU over the measured window are divided by the EVENT frames
// delivered. Builds given as dist roots are run in turn, the order alternated each round, against
// one relay and one Valkey, so they are compared side by side:
//   node scripts/req-burst-cost.mjs --valkey 127.0.0.1:6460 [--relay reference|nostr-rs-relay]
//     [--limit 200] [--connections 16] [--rounds 3] [--seconds 15] ROOT [ROOT...]
// where each ROOT holds dist/ (default: this checkout).
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { WebSocket } from 'ws';
import { finalizeEvent, generateSecretKey } from 'nostr-tools/pure';

const here = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const opt = (name, fallback) => {
  const at = args.indexOf(`--${name}`);
  if (at < 0) return fallback;
  const value = args[at + 1];
  args.splice(at, 2);
  return value;
};
const valkey = opt('valkey');
const relayKind = opt('relay', 'reference');
const LIMIT = Number(opt('limit', '200'));
const CONNS = Number(opt('connections', '16'));
const ROUNDS = Number(opt('rounds', '3'));
const SECONDS = Number(opt('seconds', '15'));
const WARM_SECONDS = 5;
const roots = args.length ? args.map((r) => path.resolve(r)) : [here];
if (!valkey) throw new Error('--valkey host:port is required (node dist/src/cli.js valkey start)');

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
/** utime + stime of a whole process (every thread), in ms (USER_HZ is 100 on Linux). */
const cpuMs = (pid) => {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
};

/** Spawn `node <cli> ...` and resolve with its process and the URL of its first ready line. */
function startCli(cli, cliArgs, env = process.env) {
  const child = spawn(process.execPath, [cli, ...cliArgs], {
    stdio: ['ignore', 'pipe', 'ignore'],
    env,
  });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${cliArgs[0]} not ready in 20 s`)), 20_000);
    let out = '';
    child.stdout.on('data', (chunk) => {
      out += chunk;
      const line = out.split('\n').find((l) => l.includes('"ready"'));
      if (!line) return;
      clearTimeout(timer);
      child.stdout.removeAllListeners('data');
      child.stdout.resume();
      resolve({ child, url: JSON.parse(line).url });
    });
    child.once('exit', (code) => reject(new Error(`${cliArgs[0]} exited ${code}`)));
  });
}

async function open(url, localAddress) {
  const ws = new WebSocket(url.replace(/^http/, 'ws'), { localAddress, handshakeTimeout: 10_000 });
  await new Promise((ok, fail) => {
    ws.once('open', ok);
    ws.once('error', fail);
  });
  return ws;
}

const sk = generateSecretKey();
const now = Math.floor(Date.now() / 1000);
const stored = Array.from({ length: LIMIT }, (_, i) =>
  finalizeEvent(
    { kind: 1, created_at: now - i, tags: [], content: `stored ${i} ${'x'.repeat(200)}` },
    sk,
  ),
);
const filter = { authors: [stored[0].pubkey], limit: LIMIT };

/**
 * A fresh relay holding the stored events (written to it directly), for one measurement:
 * nostr-rs-relay 0.8.12 stops answering REQs once clients that left mid-answer (the last
 * run's) held its queries, so no relay outlives the run it served.
 */
async function freshRelay(work) {
  let relay;
  if (relayKind === 'nostr-rs-relay') {
    const { startNostrRsRelay } = await import(`${here}/dist/src/bench/run/third-party-relay.js`);
    const started = await startNostrRsRelay(work, (line) => console.error(line));
    relay = { pid: started.pid, url: started.url, stop: () => started.stop() };
  } else {
    const { child, url } = await startCli(`${here}/dist/src/cli.js`, [
      'relay',
      '--node-id',
      'relay-a',
      '--port',
      '0',
      '--fresh',
      '--drain-bytes-per-sec',
      '0',
      '--data-dir',
      path.join(work, 'relay'),
    ]);
    relay = {
      pid: child.pid,
      url,
      stop: async () => {
        child.kill();
        await new Promise((r) => child.once('exit', r));
      },
    };
  }
  const writer = await open(relay.url, '127.0.0.1');
  for (const event of stored) {
    writer.send(JSON.stringify(['EVENT', event]));
    await new Promise((r) => writer.once('message', r));
  }
  writer.close();
  return relay;
}

/** One build's gateway under the load: EVENT/s delivered and CPU µs per EVENT. */
async function measure(root) {
  const work = mkdtempSync(path.join(os.tmpdir(), 'sluice-req-burst-'));
  const relay = await freshRelay(work);
  try {
    const { child: gw, url } = await startCli(
      `${root}/dist/src/cli.js`,
      [
        'gateway',
        '--port',
        '0',
        '--admin-port',
        '0',
        '--upstream',
        `relay-a=${relay.url}`,
        '--valkey-nodes',
        valkey,
      ],
      { ...process.env, SLUICE_ADMIN_TOKEN: 'req-burst-cost-admin-token-0123' },
    );
    let delivered = 0;
    let counting = false;
    let stop = false;
    const failures = [];
    const client = async (c) => {
      const ws = await open(url, `127.0.1.${c + 1}`);
      for (let n = 0; !stop; n++) {
        const sub = `s${n}`;
        await new Promise((done, fail) => {
          const timer = setTimeout(() => fail(new Error(`no EOSE for ${sub} in 10 s`)), 10_000);
          const on = (data) => {
            const text = data.toString();
            if (text.startsWith('["EVENT"')) {
              if (counting) delivered++;
            } else if (text.startsWith('["EOSE"')) {
              clearTimeout(timer);
              ws.off('message', on);
              done();
            } else {
              clearTimeout(timer);
              fail(new Error(`unexpected answer: ${text.slice(0, 200)}`));
            }
          };
          ws.on('message', on);
          ws.send(JSON.stringify(['REQ', sub, filter]));
        });
        ws.send(JSON.stringify(['CLOSE', sub]));
      }
      ws.close();
    };
    const clients = Array.from({ length: CONNS }, (_, c) =>
      client(c).catch((e) => failures.push(e)),
    );
    await sleep(WARM_SECONDS * 1000);
    counting = true;
    const before = {
      gw: cpuMs(gw.pid),
      relay: cpuMs(relay.pid),
      load: process.cpuUsage(),
      at: Date.now(),
    };
    await sleep(SECONDS * 1000);
    counting = false;
    const load = process.cpuUsage(before.load);
    const used = {
      gateway: cpuMs(gw.pid) - before.gw,
      relay: cpuMs(relay.pid) - before.relay,
      load: (load.user + load.system) / 1000,
    };
    const secs = (Date.now() - before.at) / 1000;
    stop = true;
    await Promise.race([Promise.all(clients), sleep(5000)]);
    gw.kill();
    await new Promise((r) => gw.once('exit', r));
    if (failures.length) throw failures[0];
    const per = (ms) => Number(((1000 * ms) / delivered).toFixed(2));
    return {
      eventsPerSec: Math.round(delivered / secs),
      gatewayUs: per(used.gateway),
      relayUs: per(used.relay),
      loadUs: per(used.load),
    };
  } finally {
    await relay.stop();
    rmSync(work, { recursive: true, force: true });
  }
}

console.log(`relay ${relayKind}, ${LIMIT} events a REQ, ${CONNS} connections, ${SECONDS} s a run`);
for (let round = 1; round <= ROUNDS; round++) {
  const order = round % 2 ? roots : [...roots].reverse();
  for (const root of order) {
    const r = await measure(root);
    console.log(
      `round ${round} ${root}: ${r.eventsPerSec} EVENT/s delivered; CPU µs per EVENT: ` +
        `gateway ${r.gatewayUs}, relay ${r.relayUs}, load ${r.loadUs}`,
    );
  }
}
