import { createHash } from 'node:crypto';
import {
  CreateBucketCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  paginateListObjectsV2,
  PutObjectCommand,
  S3Client,
  S3ServiceException,
} from '@aws-sdk/client-s3';
import type { Config } from '../core/config.ts';
import { assertSha256, BlobNotFoundError, SHA256_HEX, type BlobStore, type PutOptions } from './blobstore.ts';

const isNotFound = (err: unknown): boolean =>
  err instanceof S3ServiceException && (err.name === 'NotFound' || err.name === 'NoSuchKey' || err.$metadata.httpStatusCode === 404);

export interface S3BlobStoreOptions {
  client: S3Client;
  bucket: string;
  /** Key prefix inside the bucket (e.g. `lenstack/blobs/`); empty = the bucket's root. */
  prefix?: string;
}

/**
 * Blobs in an S3-compatible bucket (AWS S3, MinIO, versitygw, R2 …), so that API and worker
 * processes on different hosts share one store. Keys shard like the filesystem store's paths
 * (`<prefix>ab/cd/<sha256>`). Every write carries the content's SHA-256 as S3's own checksum, so
 * the server refuses bytes that were damaged on the way; a blob is immutable once written (its key
 * is its hash), so a concurrent second write of the same blob is harmless.
 */
export class S3BlobStore implements BlobStore {
  private readonly client: S3Client;
  private readonly bucket: string;
  private readonly prefix: string;

  constructor(opts: S3BlobStoreOptions) {
    this.client = opts.client;
    this.bucket = opts.bucket;
    this.prefix = opts.prefix ?? '';
  }

  keyOf(sha256: string): string {
    assertSha256(sha256);
    return `${this.prefix}${sha256.slice(0, 2)}/${sha256.slice(2, 4)}/${sha256}`;
  }

  async put(sha256: string, bytes: Buffer, opts: PutOptions = {}): Promise<boolean> {
    const key = this.keyOf(sha256);
    if (await this.has(sha256)) return false;
    // The key checked here, unless the caller computed it from these bytes; a server that honours
    // ChecksumSHA256 (AWS S3, MinIO, versitygw) checks the bytes against it again and refuses a
    // mismatch. One that ignores it does not: `verified` is passed only by a caller that hashed
    // these very bytes (uploads/service.ts `complete`, images/intake.ts).
    const digest = opts.verified ? Buffer.from(sha256, 'hex') : createHash('sha256').update(bytes).digest();
    const actual = digest.toString('hex');
    if (actual !== sha256) throw new Error(`Blob content hashes to ${actual}, not ${sha256}`);
    await this.client.send(
      new PutObjectCommand({
        Bucket: this.bucket,
        Key: key,
        Body: bytes,
        ContentLength: bytes.length,
        ContentType: 'application/octet-stream',
        ChecksumSHA256: digest.toString('base64'),
      }),
    );
    return true;
  }

  async get(sha256: string): Promise<Buffer> {
    try {
      const r = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: this.keyOf(sha256) }));
      if (!r.Body) throw new Error(`S3 returned no body for ${sha256}`);
      return Buffer.from(await r.Body.transformToByteArray());
    } catch (err) {
      // Only a missing key is a missing blob; a missing bucket is a configuration error.
      if (err instanceof S3ServiceException && err.name === 'NoSuchKey') throw new BlobNotFoundError(sha256);
      throw err;
    }
  }

  async has(sha256: string): Promise<boolean> {
    try {
      await this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: this.keyOf(sha256) }));
      return true;
    } catch (err) {
      if (isNotFound(err)) return false;
      throw err;
    }
  }

  async delete(sha256: string): Promise<void> {
    await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: this.keyOf(sha256) }));
  }

  async *list(): AsyncIterable<{ sha256: string; writtenAt: Date; bytes: number }> {
    for await (const page of paginateListObjectsV2({ client: this.client, pageSize: 1000 }, { Bucket: this.bucket, Prefix: this.prefix })) {
      for (const o of page.Contents ?? []) {
        const name = o.Key?.slice(o.Key.lastIndexOf('/') + 1) ?? '';
        if (!SHA256_HEX.test(name) || o.Key !== this.keyOf(name)) continue;
        yield { sha256: name, writtenAt: o.LastModified ?? new Date(0), bytes: o.Size ?? 0 };
      }
    }
  }
}

/** An S3 client for the configured server: static keys when given, else the SDK's default chain. */
export function s3ClientFromConfig(config: Pick<Config, 'S3_ENDPOINT' | 'S3_REGION' | 'S3_FORCE_PATH_STYLE' | 'S3_ACCESS_KEY_ID' | 'S3_SECRET_ACCESS_KEY'>): S3Client {
  return new S3Client({
    region: config.S3_REGION,
    ...(config.S3_ENDPOINT ? { endpoint: config.S3_ENDPOINT } : {}),
    forcePathStyle: config.S3_FORCE_PATH_STYLE,
    ...(config.S3_ACCESS_KEY_ID && config.S3_SECRET_ACCESS_KEY
      ? { credentials: { accessKeyId: config.S3_ACCESS_KEY_ID, secretAccessKey: config.S3_SECRET_ACCESS_KEY } }
      : {}),
    maxAttempts: 3,
  });
}


/**
 * Makes the bucket when it does not exist (`npm run migrate` with BLOB_STORE=s3, so a fresh
 * self-hosted server works without a separate step). True when it was made now.
 */
export async function ensureBucket(client: S3Client, bucket: string): Promise<boolean> {
  try {
    await client.send(new HeadBucketCommand({ Bucket: bucket }));
    return false;
  } catch (err) {
    if (!isNotFound(err)) throw err;
  }
  try {
    await client.send(new CreateBucketCommand({ Bucket: bucket }));
    return true;
  } catch (err) {
    // Another replica's migrate made it first.
    if (err instanceof S3ServiceException && (err.name === 'BucketAlreadyOwnedByYou' || err.name === 'BucketAlreadyExists')) return false;
    throw err;
  }
}
