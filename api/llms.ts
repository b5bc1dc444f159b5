import { z } from 'zod';
import { ANONYMOUS_SANDBOX_KEY } from '../auth/keys.ts';
import { buildCatalog } from '../lenses/catalog.ts';
import { ACCEPTED_FORMATS } from '../images/probe.ts';
import { BESPOKE_CREDITS, CENTS_PER_CREDIT, ENRICH_CREDITS, LENS_CREDITS, PACK_NAMES, PACKS } from '../credits/price-book.ts';

export const DISCOVERY_PATH = '/.well-known/lenstack.json';

/** The plain-text description for AI agents (docs/contract.md "GET /v1/llms.txt"), generated from the catalog. */
export function buildLlmsTxt(): string {
  const { modules, presets } = buildCatalog();
  // Every figure of money and credits below is the price book's (credits/price-book.ts).
  const credits = (n: number) => `${n} credit${n === 1 ? '' : 's'}`;
  const thousands = (n: number) => n.toLocaleString('en-US');
  const packs = PACK_NAMES.map((name, i) => `${PACKS[name].label} ${thousands(PACKS[name].credits)}${i === 0 ? ' credits' : ''} ${thousands(PACKS[name].priceCents / 100)} USD`).join(', ');
  const lensLines = modules.map(
    (m) =>
      `- ${m.name}${m.internal ? ' (internal: only through the stack of the same name)' : ''} [${m.category}, ${m.billable ? `${credits(LENS_CREDITS)} per image` : 'free'}]: ${m.description} Output fields: ${m.outputFields.join(', ')}.`,
  );
  const stackLines = presets.map((p) => `- ${p.name}: ${p.description} Lenses: ${p.modules.join(', ')}.`);
  return `# Lenstack

> Photo analysis API: send a photo (or up to 50), pick lenses one by one or as a curated stack, get structured JSON from AI vision models. Every photo is remembered per user, so asking again never bills a lens twice.

## Endpoints
- POST /v1/analyze — analyze (Bearer key). Body: imageUrl | imageBase64 | images[{url|base64}] (1-50), preset, modules, modulesAdd, modulesRemove, moduleOptions, context {knownPeople, vehicle, customInstructions}, options {includeEmbedding, includeFingerprint}, refresh.
- POST /v2/analyze — analyze plus bespoke extraction (extract: prompt | schema | schemaId), ${credits(BESPOKE_CREDITS)} per extraction.
- POST /v2/lookup — look up earlier results by image (free). GET /v2/lookup?sha256=… or ?pHash=…&threshold=5 — by fingerprint (free).
- POST /v2/enrich — write cached lens output into the photo's EXIF/IPTC/XMP (${credits(ENRICH_CREDITS)}).
- DELETE /v1/photos/{sha256} — erase a photo from your registry with its lens records, and its bytes once nothing else keeps them (free; live keys; 404 when your registry does not hold it).
- GET /v1/modules — this catalog as JSON.
- GET /v1/usage — credit balance.
- GET /v1/health, GET /v1/openapi.json (OpenAPI 3.1), GET /v1/docs (interactive docs), GET /v1/llms.txt (this file), GET ${DISCOVERY_PATH} (discovery index).

## Images
${ACCEPTED_FORMATS}; up to 50 MiB and 100 megapixels by default (422 IMAGE_INVALID or IMAGE_TOO_LARGE otherwise).

## Authentication
Authorization: Bearer <key>. Live keys start with svc_live_, sandbox keys with svc_test_ (fixtures, instant, nothing billed).
Anonymous sandbox key (public, 2 requests/minute and 10/day per IP): ${ANONYMOUS_SANDBOX_KEY}

## Billing
${credits(LENS_CREDITS)} per billable lens per image (${(CENTS_PER_CREDIT / 100).toFixed(2)} USD per credit). moderation always runs and is free.
Delta billing: a lens already run on the same photo (same SHA-256, same account) is served from the registry for 0 credits; only new lenses are sent to the AI provider. refresh: true re-runs and bills every requested lens.
Lookups and cache hits are free. Packs: ${packs}; the first pack gives 2x. No subscriptions; credits never expire.

## Lenses
${lensLines.join('\n')}

## Stacks
${stackLines.join('\n')}

## Errors
Every error is {"error": {"code", "message", "retryable", "requestId"}}. 402 PLAN_LIMIT_EXCEEDED carries error.credits {needed, community, purchased, total, resetsInDays}. 429 RATE_LIMITED carries Retry-After.

## Install
Any HTTP client works (a typed TypeScript client and a CLI are below). Example with curl:
curl -s https://<base_url>/v1/analyze -H "Authorization: Bearer ${ANONYMOUS_SANDBOX_KEY}" -H "Content-Type: application/json" -d '{"imageUrl":"https://example.com/photo.jpg","preset":"quick-scan"}'
TypeScript: the typed client @lenstack/client (generated from /v1/openapi.json; retries 429/503 with the same x-request-id) is in the Lenstack repository under clients/typescript, an npm workspace: after \`npm ci\` in a clone, import { Lenstack } from '@lenstack/client'; new Lenstack({ apiKey, baseUrl }).analyze({ imageUrl, preset: 'quick-scan' }).
Command line, from a clone: LENSTACK_API_KEY=<key> LENSTACK_BASE_URL=<base_url> npx lenstack analyze photo.jpg --stack full-analysis (also lookup, enrich, batch; npx lenstack --help).
`;
}

const endpoint = z.object({ method: z.enum(['GET', 'POST']), path: z.string() });

/** The discovery index: where the documents are and the main operations. */
export const discoverySchema = z
  .object({
    name: z.string(),
    description: z.string(),
    docs: z.string(),
    openapi: z.string(),
    health: z.string(),
    llms: z.string(),
    operations: z.object({
      analyze: endpoint,
      analyzeV2: endpoint,
      lookup: z.array(endpoint),
      enrich: endpoint,
      modules: endpoint,
      usage: endpoint,
      docs: endpoint,
      llmsTxt: endpoint,
    }),
  })
  .meta({ id: 'Discovery' });

export function buildDiscovery(): z.infer<typeof discoverySchema> {
  return {
    name: 'Lenstack',
    description: 'Photo analysis API with AI vision lenses, a per-user photo registry and prepaid credits.',
    docs: '/v1/docs',
    openapi: '/v1/openapi.json',
    health: '/v1/health',
    llms: '/v1/llms.txt',
    operations: {
      analyze: { method: 'POST', path: '/v1/analyze' },
      analyzeV2: { method: 'POST', path: '/v2/analyze' },
      lookup: [
        { method: 'POST', path: '/v2/lookup' },
        { method: 'GET', path: '/v2/lookup' },
      ],
      enrich: { method: 'POST', path: '/v2/enrich' },
      modules: { method: 'GET', path: '/v1/modules' },
      usage: { method: 'GET', path: '/v1/usage' },
      docs: { method: 'GET', path: '/v1/docs' },
      llmsTxt: { method: 'GET', path: '/v1/llms.txt' },
    },
  };
}
