import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TLSSocket } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fetchImage, type FetchImageOptions } from '../../images/fetch.ts';
import { photo } from './photos.ts';
import { scriptedLookup } from './servers.ts';

/**
 * https through the pinned socket: the connection goes to the checked address while SNI and the
 * certificate check use the URL's name. The certificate is made for this run with openssl.
 */
describe('fetchImage over https', () => {
  const NAME = 'images.example.test';
  const image = photo('Pentax_K10D.jpg');
  let cert: string;
  let server: https.Server;
  let port: number;
  const serverNames: Array<string | false | null> = [];

  beforeAll(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'lenstack-tls-'));
    try {
      execFileSync('openssl', [
        'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1',
        '-subj', `/CN=${NAME}`, '-addext', `subjectAltName=DNS:${NAME}`,
        '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem'),
      ], { stdio: 'ignore' });
      cert = readFileSync(join(dir, 'cert.pem'), 'utf8');
      const key = readFileSync(join(dir, 'key.pem'), 'utf8');
      server = https.createServer({ key, cert }, (req, res) => {
        serverNames.push((req.socket as TLSSocket).servername);
        res.writeHead(200, { 'content-type': 'image/jpeg' }).end(image);
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.2', resolve));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  const opts = (extra: Partial<FetchImageOptions>): FetchImageOptions => ({
    maxBytes: 1024 * 1024,
    timeoutMs: 5_000,
    allowAddress: (ip) => ip === '127.0.0.2',
    lookup: scriptedLookup([['127.0.0.2']]),
    ...extra,
  });

  it('connects to the checked address, sends the name as SNI and verifies the certificate for the name', async () => {
    const got = await fetchImage(`https://${NAME}:${port}/image.jpg`, opts({ ca: cert }));
    expect(got.bytes.equals(image)).toBe(true);
    expect(serverNames.at(-1)).toBe(NAME);
  });

  it('refuses an untrusted certificate', async () => {
    await expect(fetchImage(`https://${NAME}:${port}/image.jpg`, opts({}))).rejects.toMatchObject({
      code: 'IMAGE_INVALID',
      message: expect.stringMatching(/SELF_SIGNED|CERT/),
    });
  });

  it('checks the certificate against the URL host: the same server by IP does not match', async () => {
    await expect(fetchImage(`https://127.0.0.2:${port}/image.jpg`, opts({ ca: cert }))).rejects.toMatchObject({
      code: 'IMAGE_INVALID',
      message: expect.stringMatching(/ERR_TLS_CERT_ALTNAME_INVALID/),
    });
  });
});
