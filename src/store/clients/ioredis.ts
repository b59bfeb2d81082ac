/** The ioredis driver: RateLimiterRedis. */
import { Cluster, Redis } from 'ioredis';
import { RateLimiterRedis } from 'rate-limiter-flexible';
import { ioDriver } from './io.js';

export const driver = ioDriver({
  Standalone: Redis,
  Cluster,
  Limiter: RateLimiterRedis,
  protocol: 'RESP3',
});
