import { z } from 'zod';
import { timestampSchema } from '../../analysis/contract.ts';
import { PACK_NAMES } from '../../credits/price-book.ts';
import { usageSchema } from '../routes/usage.ts';

/** Every account route is server-to-server (the web dashboard): `x-internal-secret`, never a key. */
export const internalRoute = { config: { auth: 'internal' as const } };
export const internalDoc = { tags: ['accounts'], security: [{ internalSecret: [] }] };

const id = z.string().min(1).max(128);
const timestamp = timestampSchema;

export const userIdParams = z.object({ userId: id });
export const keyParams = z.object({ userId: id, keyId: id });

export const createAccountBody = z.strictObject({ email: z.string().min(3).max(320) });

export const accountSchema = z
  .object({
    userId: z.string(),
    email: z.string(),
    emailVerifiedAt: timestamp.nullable(),
    cardOnFileAt: timestamp.nullable(),
    createdAt: timestamp,
    packsPurchased: z.number().int(),
    firstPackBonusAvailable: z.boolean().describe('The next pack bought ships with 2× its credits.'),
    credits: usageSchema,
  })
  .meta({ id: 'Account' });

export const emailVerificationSchema = z
  .object({
    token: z.string().describe('Shown once; only its SHA-256 is stored. Put it in the link the dashboard mails.'),
    expiresAt: timestamp,
  })
  .meta({ id: 'EmailVerificationToken' });

export const verifyEmailBody = z.strictObject({ token: z.string().min(1).max(200) });

export const emailVerifiedSchema = z
  .object({
    userId: z.string(),
    emailVerifiedAt: timestamp,
    granted: z.number().int().describe('Community credits granted by this call: 1000 the first time, else 0.'),
  })
  .meta({ id: 'EmailVerified' });

export const cardOnFileSchema = z
  .object({
    userId: z.string(),
    cardOnFileAt: timestamp,
    granted: z.number().int().describe('Community credits granted by this call: 4000 the first time, else 0.'),
  })
  .meta({ id: 'CardOnFile' });

export const keyListingSchema = z
  .object({
    id: z.string(),
    kind: z.enum(['live', 'test']),
    prefix: z.string().describe('svc_live_ or svc_test_'),
    last4: z.string(),
    name: z.string().nullable(),
    createdAt: timestamp,
    lastUsedAt: timestamp.nullable().describe('When the key was last used, to the minute; null until its first use.'),
    revokedAt: timestamp.nullable(),
  })
  .meta({ id: 'ApiKeyListing' });

export const issuedKeySchema = keyListingSchema
  .extend({ key: z.string().describe('The full key, shown this once and never stored.') })
  .meta({ id: 'IssuedApiKey' });

export const issueKeyBody = z.strictObject({
  kind: z.enum(['live', 'test']),
  name: z.string().min(1).max(100).optional(),
});

export const revokedKeySchema = z
  .object({
    keyId: z.string(),
    revokedAt: timestamp,
    apiProcessesNotified: z.number().int().describe('API processes the Redis eviction broadcast reached.'),
  })
  .meta({ id: 'RevokedApiKey' });

export const packSchema = z
  .object({
    name: z.enum(PACK_NAMES),
    label: z.string(),
    credits: z.number().int(),
    priceCents: z.number().int(),
    currency: z.literal('usd'),
  })
  .meta({ id: 'CreditPack' });

export const purchaseBody = z.strictObject({
  pack: z.enum(PACK_NAMES),
  idempotencyKey: z.string().min(1).max(200).describe('The same key for a retried purchase: it is never captured or granted twice.'),
});

export const purchaseSchema = z
  .object({
    purchaseId: z.string(),
    pack: z.enum(PACK_NAMES),
    credits: z.number().int(),
    bonusCredits: z.number().int().describe('First-pack bonus: equal to credits on the first pack a user buys, else 0.'),
    amountCents: z.number().int(),
    currency: z.literal('usd'),
    status: z.enum(['pending', 'granted', 'failed']),
    paymentId: z.string().nullable(),
    failure: z.string().nullable(),
    idempotencyKey: z.string(),
    createdAt: timestamp,
    completedAt: timestamp.nullable(),
    checkoutUrl: z.string().optional().describe('Set while a purchase paid on a hosted page (Stripe Checkout) is pending: where to send the buyer.'),
  })
  .meta({ id: 'CreditPurchase' });
