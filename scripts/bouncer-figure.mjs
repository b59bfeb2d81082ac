#!/usr/bin/env node
/* global console, process, setTimeout, setInterval, clearInterval */
// A bouncer against an honest writer (issue 34, "Answers clients can act on"): each sends 30
// EVENTs a second for SECONDS through a gateway of its own in front of one reference relay;
// the honest one writes new events within its quota, the bouncer sends its one refused event
// again at once (reconnecting when closed, as bostr does). Prints what each was answered per
// second and the gateway's CPU per frame it sent (/proc/<pid>/stat). Three gateways: the honest
// writer's, the bouncer's under the defaults (limits.earlyRetries), and the bouncer's with the
// hold and the close turned (almost) off (holdMs 1, max 1e9): early copies still answered from
// memory. Usage: node scripts/bouncer-figure.mjs VALKEY_HOST:PORT [SECONDS] (needs npm run build).
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { WebSocket } from 'ws';
import { finalizeEvent, generateSecretKey } from 'nostr-tools/pure';

const [valkey = '127.0.0.1:6379', secondsArg = '10'] = process.argv.slice(2);
const SECONDS = Number(secondsArg);
const PER_SEC = 30;
const root = path.resolve('dist');
const { startRelay, startGateway } = await import(`${root}/src/harness/processes.js`);

function cpuMs(pid) {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100;
}

async function gateway(relay, name, settings) {
  const dir = mkdtempSync(path.join(tmpdir(), `sluice-bouncer-${name}-`));
  const config = {
    listen: { port: 0 },
    admin: { port: 0, token: 'bouncer-figure-admin-token-0123' },
    valkey: { client: 'iovalkey', mode: 'standalone', nodes: [valkey] },
    upstreams: [{ id: 'relay-a', url: relay.url }],
    logging: { level: 'warn' },
    workers: 1,
    ...settings,
    quotas: { keyPrefix: `bouncer${name}${Date.now().toString(36)}`, ...settings.quotas },
  };
  return startGateway(config, path.join(dir, 'gateway.json'));
}

function connect(url, from) {
  const ws = new WebSocket(url.replace(/^http/, 'ws'), { localAddress: from });
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve(ws));
    ws.once('error', reject);
  });
}

const note = (sk, n) =>
  finalizeEvent(
    { kind: 1, created_at: Math.floor(Date.now() / 1000), tags: [], content: `n${n}` },
    sk,
  );

/** Send 30 a second for SECONDS; `next()` is what to send; reconnects when closed. */
async function drive(gw, from, next, prime) {
  let ws = await connect(gw.url, from);
  let answers = 0;
  let closes = 0;
  const listen = (socket) =>
    socket.on('message', (d) => (JSON.parse(d)[0] === 'OK' ? answers++ : 0));
  listen(ws);
  if (prime) await prime(ws);
  answers = 0;
  const cpu0 = cpuMs(gw.proc.pid);
  const t0 = Date.now();
  let sent = 0;
  await new Promise((resolve) => {
    const timer = setInterval(async () => {
      if (Date.now() - t0 >= SECONDS * 1000) {
        clearInterval(timer);
        resolve();
        return;
      }
      if (ws.readyState !== ws.OPEN) {
        if (ws.readyState === ws.CLOSED && !ws.reconnecting) {
          ws.reconnecting = true;
          closes++;
          ws = await connect(gw.url, from).catch(() => ws);
          listen(ws);
        }
        return;
      }
      ws.send(JSON.stringify(['EVENT', next()]));
      sent++;
    }, 1000 / PER_SEC);
  });
  const elapsed = (Date.now() - t0) / 1000;
  const cpu = cpuMs(gw.proc.pid) - cpu0;
  ws.close();
  return {
    sent,
    answers,
    answeredPerSec: answers / elapsed,
    closes,
    cpuMs: cpu,
    cpuMsPerFrame: cpu / sent,
  };
}

const relay = await startRelay({ nodeId: 'relay-a' });
const honestGw = await gateway(relay, 'honest', {
  quotas: { tiers: { default: { write: { points: 100_000, windowSec: 60 } } } },
});
const tight = { quotas: { tiers: { default: { write: { points: 1, windowSec: 60 } } } } };
const bouncerGw = await gateway(relay, 'bouncer', tight);
const unslowedGw = await gateway(relay, 'unslowed', {
  ...tight,
  limits: { earlyRetries: { holdMs: 1, max: 1_000_000_000 } },
});
/** Each gateway's own CPU while idle (health checks, timers), per second: subtracted below. */
async function idleMsPerSec(gws) {
  const before = gws.map((g) => cpuMs(g.proc.pid));
  await new Promise((r) => setTimeout(r, SECONDS * 1000));
  return gws.map((g, i) => (cpuMs(g.proc.pid) - before[i]) / SECONDS);
}

function net(result, idle) {
  const cpuMsNet = Math.max(0, result.cpuMs - idle * SECONDS);
  return { ...result, idleCpuMsPerSec: idle, cpuMsNet, cpuMsNetPerFrame: cpuMsNet / result.sent };
}

try {
  const [idleHonest, idleBouncer, idleUnslowed] = await idleMsPerSec([
    honestGw,
    bouncerGw,
    unslowedGw,
  ]);
  const sk = generateSecretKey();
  let n = 0;
  const honest = await drive(honestGw, '127.0.50.2', () => note(sk, n++));
  // The bouncer's refused event: its second write in a window of one.
  const bounced = note(generateSecretKey(), -1);
  const prime = async (ws) => {
    ws.send(JSON.stringify(['EVENT', note(generateSecretKey(), -2)]));
    ws.send(JSON.stringify(['EVENT', bounced]));
    await new Promise((r) => setTimeout(r, 500));
  };
  const bouncer = await drive(bouncerGw, '127.0.50.3', () => bounced, prime);
  const unslowed = await drive(unslowedGw, '127.0.50.4', () => bounced, prime);
  const figures = {
    seconds: SECONDS,
    perSec: PER_SEC,
    honest: net(honest, idleHonest),
    bouncer: net(bouncer, idleBouncer),
    unslowed: net(unslowed, idleUnslowed),
  };
  console.log(JSON.stringify(figures, null, 1));
} finally {
  await Promise.all([honestGw.proc.stop(), bouncerGw.proc.stop(), unslowedGw.proc.stop()]);
  await relay.stop();
}
