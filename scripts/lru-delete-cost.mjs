#!/usr/bin/env node
/* global console, process */
// CPU of a set and a delete of a cache's only entry (a set of writes awaiting their relay's
// answer on a quiet gateway), lru-cache 11 against the gateway's Lru (src/util/lru.ts), by max
// and with or without a TTL (docs/BENCHMARKS.md, "Caches that empty"). After a build:
//   node scripts/lru-delete-cost.mjs
import { LRUCache } from 'lru-cache';
import { Lru } from '../dist/src/util/lru.js';

for (const max of [10_000, 100_000, 1_000_000]) {
  for (const ttl of [0, 30_000]) {
    const row = [];
    for (const Cache of [LRUCache, Lru]) {
      const cache = new Cache({ max, ...(ttl ? { ttl, ttlAutopurge: false } : {}) });
      const n = 2000;
      const cpu = process.cpuUsage();
      for (let i = 0; i < n; i++) {
        cache.set(`k${i}`, 1);
        cache.delete(`k${i}`);
      }
      const used = process.cpuUsage(cpu);
      row.push(((used.user + used.system) / n).toFixed(1));
    }
    console.log(`max ${max}, ttl ${ttl ? 'yes' : 'no'}: lru-cache ${row[0]} us, Lru ${row[1]} us`);
  }
}
