#!/usr/bin/env node
/* global process, performance, setImmediate, console */
// Client CPU per lease take, one take per event-loop turn (as takes come when most writes
// spend a held point) or in bursts: node scripts/lease-take-cpu.mjs CLIENT MODE HOST:PORT [N]
// [BURST]. AUTO_PIPELINING=0 turns ioredis / iovalkey auto-pipelining off for everything.
// Run from the repository after `npm run build`; it writes keys `lease-take-cpu:*` (60 s TTL).
import { createStore, parseNodeAddress } from '../dist/src/store/index.js';

const [client, mode, address, n = '3000', burst = '1'] = process.argv.slice(2);
if (!client || !mode || !address) {
  console.error('usage: node scripts/lease-take-cpu.mjs CLIENT MODE HOST:PORT [N] [BURST]');
  process.exit(2);
}
const store = await createStore({
  client,
  mode,
  nodes: [parseNodeAddress(address)],
  autoPipelining: process.env.AUTO_PIPELINING !== '0',
});
const total = Number(n);
const size = Number(burst);
const key = (i) => `lease-take-cpu:{${(i * 2654435761) % 100000}}:${process.pid}`;
for (let i = 0; i < 300; i++) await store.leases.take(key(i), 1, 1e9, 60_000); // warm up
const cpu0 = process.cpuUsage();
const t0 = performance.now();
for (let i = 0; i < total; i += size) {
  const takes = [];
  for (let j = 0; j < size; j++) takes.push(store.leases.take(key(i + j), 1, 1e9, 60_000));
  await Promise.all(takes);
  await new Promise((resolve) => setImmediate(resolve));
}
const cpu = process.cpuUsage(cpu0);
const wall = performance.now() - t0;
const us = (x) => ((x / total) * 1000).toFixed(1);
console.log(
  `${client} ${mode} burst ${size}: ${us((cpu.user + cpu.system) / 1000)} us CPU/take, ${us(wall)} us wall/take`,
);
await store.close();
process.exit(0);
