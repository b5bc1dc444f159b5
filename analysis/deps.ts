import type { Client } from '@temporalio/client';
import type { BaseLogger } from 'pino';
import type { Config } from '../core/config.ts';
import type { Db } from '../db/pool.ts';
import type { BlobStore } from '../images/blobstore.ts';
import type { FetchPolicy } from '../images/fetch.ts';
import type { ApiMetrics } from '../metrics/api.ts';
import type { Uploads } from '../uploads/service.ts';

/** What an analysis needs from the process that serves it (the composition root builds it once). */
export interface AnalyzeDeps {
  config: Config;
  db: Db;
  blobs: BlobStore;
  temporal: Client;
  /** How image URLs are fetched (the composition root's choice). */
  fetchPolicy: FetchPolicy;
  /** The request's logger (its lines carry requestId; workflow lines add workflowId). */
  log?: Pick<BaseLogger, 'info' | 'warn' | 'error'>;
  metrics: ApiMetrics;
  /** Aborted when the API stops waiting on workflows at shutdown (api/drain.ts). */
  abandon?: AbortSignal;
  /** Aborted when the caller's connection closes before its answer: queued image decodes are dropped. */
  signal?: AbortSignal;
  /** Finished uploads named by id (`uploadId`); absent = an upload id is 404. */
  uploads?: Uploads;
}
