/**
 * The AI vendors' names, and what of each is spelled outside its folder (vendors/<vendor>/): the
 * prefix of its environment variables, its default model and the name of its Temporal activity. Pure data with no import, so the
 * workflow sandbox, the config schema and the log redaction can all derive from it;
 * the rest of each vendor is its folder, which `vendors/registry.ts` (its plug-in: client, billed
 * size, dialect) and the simulator (its simulated vendor) load by these names, and
 * test/vendors/registry.test.ts checks that every list equals this one (docs/architecture.md,
 * "Adding a vendor").
 */
export const VENDOR_NAMES = ['openai', 'anthropic', 'google'] as const;

export type VendorName = (typeof VENDOR_NAMES)[number];

/** Prefix of the vendor's variables: `<PREFIX>_API_KEY`, `_BASE_URL`, `_MODEL`, `_RPM`, `_TPM`. */
export const VENDOR_ENV_PREFIX = {
  openai: 'OPENAI',
  anthropic: 'ANTHROPIC',
  google: 'GEMINI',
} as const satisfies Record<VendorName, string>;

/** The model asked for when `<PREFIX>_MODEL` is unset. */
export const VENDOR_DEFAULT_MODEL = {
  openai: 'gpt-4.1-mini',
  anthropic: 'claude-sonnet-4-6',
  google: 'gemini-2.5-flash',
} as const satisfies Record<VendorName, string>;

/**
 * The vendor's activity type. Recorded workflow histories name these (test/workflows/replay.test.ts):
 * an existing vendor's never changes.
 */
export const VENDOR_ACTIVITY = {
  openai: 'callOpenAI',
  anthropic: 'callAnthropic',
  google: 'callGoogle',
} as const satisfies Record<VendorName, string>;

export type VendorActivityName = (typeof VENDOR_ACTIVITY)[VendorName];

/** Config paths of the vendors' API keys, redacted from every log (core/logger.ts). */
export const VENDOR_SECRET_PATHS: readonly string[] = VENDOR_NAMES.map((v) => `config.${VENDOR_ENV_PREFIX[v]}_API_KEY`);
