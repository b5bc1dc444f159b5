/**
 * Analyze one photo with @lenstack/client, then find it again for free.
 *
 *   LENSTACK_API_KEY=svc_live_… npx tsx examples/analyze.ts path/to/photo.jpg
 *
 * LENSTACK_BASE_URL defaults to http://localhost:8080 (`npm start`).
 */
import { readFile } from 'node:fs/promises';
import { Lenstack, LenstackError, photoOutput } from '@lenstack/client';

const photo = process.argv[2];
if (!photo) {
  console.error('usage: npx tsx examples/analyze.ts <photo>');
  process.exit(2);
}
const lenstack = new Lenstack({ apiKey: process.env.LENSTACK_API_KEY, baseUrl: process.env.LENSTACK_BASE_URL });

try {
  const analysis = await lenstack.analyze({
    imageBase64: (await readFile(photo)).toString('base64'),
    modules: ['dating', 'describe'],
    options: { includeFingerprint: true },
  });
  // The lens outputs are typed: estimatedDate is the dating lens's, title the describe lens's.
  const output = photoOutput(analysis);
  const date = output.estimatedDate;
  console.log(`${output.title ?? 'untitled'}`);
  console.log(`taken around ${date?.year ?? 'an unknown year'} (${Math.round((date?.confidence ?? 0) * 100)}% sure)`);
  console.log(`${analysis.usage.creditsCharged ?? 0} credits, request ${analysis.meta.requestId}`);

  // Looking it up later costs nothing; so does asking for the same lenses again.
  const { results } = await lenstack.lookupByFingerprint({ sha256: analysis.fingerprint!.sha256 });
  const lenses = Object.keys(results[analysis.fingerprint!.sha256]?.photo?.lenses ?? {});
  console.log(`registry: ${lenses.sort().join(', ')}`);
} catch (err) {
  if (!(err instanceof LenstackError)) throw err;
  // Every failure carries the API's code, its HTTP status and the request id to quote.
  console.error(`${err.code} (${err.status ?? 'no answer'}): ${err.message} [request ${err.requestId}]`);
  if (err.credits) console.error(`needed ${err.credits.needed} credits, ${err.credits.total} available`);
  process.exitCode = 1;
}
