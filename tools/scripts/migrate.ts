import { loadConfig } from '../../core/config.ts';
import { createDatabaseIfMissing, migrate } from '../../db/migrate.ts';
import { ensureBucket, s3ClientFromConfig } from '../../images/s3-blobstore.ts';

const config = loadConfig();
if (await createDatabaseIfMissing(config.DATABASE_URL)) console.log('created database');
await migrate(config.DATABASE_URL, (m) => console.log(m));
console.log('migrations applied');
if (config.BLOB_STORE === 's3') {
  const client = s3ClientFromConfig(config);
  console.log((await ensureBucket(client, config.S3_BUCKET!)) ? `created bucket ${config.S3_BUCKET}` : `bucket ${config.S3_BUCKET} is there`);
  client.destroy();
}
