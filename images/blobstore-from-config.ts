import type { Config } from '../core/config.ts';
import { FsBlobStore, type BlobStore } from './blobstore.ts';
import { S3BlobStore, s3ClientFromConfig } from './s3-blobstore.ts';

/** The store the configuration names: the local directory (default) or an S3-compatible bucket. */
export function blobStoreFromConfig(config: Config): BlobStore {
  if (config.BLOB_STORE === 's3') return new S3BlobStore({ client: s3ClientFromConfig(config), bucket: config.S3_BUCKET!, prefix: config.S3_PREFIX });
  return new FsBlobStore(config.BLOB_DIR);
}
