/** The iovalkey driver: RateLimiterValkey. */
import { Cluster, Redis } from 'iovalkey';
import { RateLimiterValkey } from 'rate-limiter-flexible';
import { ioDriver } from './io.js';

export const driver = ioDriver({
  Standalone: Redis,
  Cluster,
  Limiter: RateLimiterValkey,
  protocol: 'RESP2',
});
