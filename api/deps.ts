import type { Logger } from 'pino';
import type { Config } from '../core/config.ts';
import type { Db } from '../db/pool.ts';
import type { KeyCache } from '../auth/cache.ts';
import type { EvictionBus } from '../auth/eviction-bus.ts';

/** Everything the HTTP app needs, built once by api/server.ts (or a test) and passed in. */
export interface AppDeps {
  config: Config;
  db: Db;
  keyCache: KeyCache;
  /** Fans evictions out to every API process; absent in single-process tests. */
  evictionBus?: EvictionBus;
  logger?: Logger | boolean;
}
