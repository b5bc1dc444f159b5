import { readFile, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { VENDOR_DEFAULT_MODEL, VENDOR_ENV_PREFIX, VENDOR_NAMES } from '../../core/vendor-names.ts';
import { VENDOR_REGISTRY } from '../../vendors/registry.ts';
import { isMain } from './is-main.ts';

/**
 * The vendors' lines in the operator's files, generated from the vendor registry
 * (docs/architecture.md, "Adding a vendor"): `npm run docs:vendors` rewrites them, and
 * test/tools/vendor-docs.test.ts fails when a committed file differs from what this makes.
 *
 * - `.env.example` and `docker-compose.yml`: the blocks between `# >>> docs:vendors <block>` and
 *   `# <<< docs:vendors`, one variable a line.
 * - `README.md`: the configuration table's vendor rows (one per vendor, the rate limits row and
 *   VENDOR_ORDER's default), found by their first cell (a table cannot hold marker comments).
 */

/** What the documents say of a vendor. */
export interface VendorDoc {
  name: string;
  prefix: string;
  defaultModel: string;
  label: string;
}

export const VENDOR_DOCS: readonly VendorDoc[] = VENDOR_NAMES.map((v) => ({
  name: v,
  prefix: VENDOR_ENV_PREFIX[v],
  defaultModel: VENDOR_DEFAULT_MODEL[v],
  label: VENDOR_REGISTRY[v].label,
}));

const ROOT = new URL('../../', import.meta.url);
export const VENDOR_DOC_FILES = ['.env.example', 'docker-compose.yml', 'README.md'] as const;
type DocFile = (typeof VENDOR_DOC_FILES)[number];

const envBlocks = (vendors: readonly VendorDoc[]): Record<string, string[]> => ({
  keys: vendors.map((v) => `${v.prefix}_API_KEY=`),
  settings: [
    `# Optional per vendor: another endpoint or model (defaults: the SDK's endpoint; ${vendors.map((v) => v.defaultModel).join(', ')}).`,
    ...vendors.flatMap((v) => [`${v.prefix}_BASE_URL=`, `${v.prefix}_MODEL=`]),
  ],
  limits: vendors.flatMap((v) => [`${v.prefix}_RPM=`, `${v.prefix}_TPM=`]),
});

const passThrough = (name: string) => `    ${name}: \${${name}:-}`;
const composeBlocks = (vendors: readonly VendorDoc[]): Record<string, string[]> => ({
  settings: vendors.flatMap((v) => ['API_KEY', 'BASE_URL', 'MODEL'].map((s) => passThrough(`${v.prefix}_${s}`))),
  limits: vendors.flatMap((v) => ['RPM', 'TPM'].map((s) => passThrough(`${v.prefix}_${s}`))),
});

/** Replaces each `# >>> docs:vendors <name>` … `# <<< docs:vendors` block's lines; every block must be there. */
function fillBlocks(text: string, blocks: Record<string, string[]>, file: string): string {
  let out = text;
  for (const [name, lines] of Object.entries(blocks)) {
    const re = new RegExp(`^([ \\t]*)# >>> docs:vendors ${name}\\n[\\s\\S]*?^[ \\t]*# <<< docs:vendors\\n`, 'm');
    if (!re.test(out)) throw new Error(`${file}: no block "# >>> docs:vendors ${name}" … "# <<< docs:vendors"`);
    out = out.replace(re, (_m, indent: string) => `${indent}# >>> docs:vendors ${name}\n${lines.map((l) => `${l}\n`).join('')}${indent}# <<< docs:vendors\n`);
  }
  return out;
}

const code = (s: string) => `\`${s}\``;
function readmeRows(vendors: readonly VendorDoc[]): { settings: string[]; limits: string } {
  return {
    settings: vendors.map(
      (v) => `| ${['API_KEY', 'BASE_URL', 'MODEL'].map((s) => code(`${v.prefix}_${s}`)).join(', ')} | –, SDK default, ${code(v.defaultModel)} | ${v.label} |`,
    ),
    limits: `| ${vendors.flatMap((v) => [code(`${v.prefix}_RPM`), code(`${v.prefix}_TPM`)]).join(', ')} |`,
  };
}

/** README.md: the run of `<PREFIX>_API_KEY` rows becomes one row per vendor; the rate-limit row's first cell names every vendor's. */
function fillReadme(text: string, vendors: readonly VendorDoc[]): string {
  const rows = readmeRows(vendors);
  const settings = /^(\| `[A-Z0-9]+_API_KEY`, .*\n)+/m;
  const limits = /^\| `[A-Z0-9]+_RPM`, [^|]*\|/m;
  const order = /^\| `VENDOR_ORDER` \| `[^`]*` \|/m;
  if (!settings.test(text) || !limits.test(text) || !order.test(text)) throw new Error('README.md: no vendor rows in the configuration table');
  return text
    .replace(settings, rows.settings.map((r) => `${r}\n`).join(''))
    .replace(limits, rows.limits)
    .replace(order, `| \`VENDOR_ORDER\` | ${code(vendors.map((v) => v.name).join(','))} |`);
}

/** The file as it should be for these vendors. */
export function renderVendorDoc(file: DocFile, text: string, vendors: readonly VendorDoc[] = VENDOR_DOCS): string {
  switch (file) {
    case '.env.example':
      return fillBlocks(text, envBlocks(vendors), file);
    case 'docker-compose.yml':
      return fillBlocks(text, composeBlocks(vendors), file);
    case 'README.md':
      return fillReadme(text, vendors);
  }
}

export const readVendorDoc = (file: DocFile): Promise<string> => readFile(fileURLToPath(new URL(file, ROOT)), 'utf8');

if (isMain(import.meta.url)) {
  for (const file of VENDOR_DOC_FILES) {
    const before = await readVendorDoc(file);
    const after = renderVendorDoc(file, before);
    if (after !== before) await writeFile(fileURLToPath(new URL(file, ROOT)), after);
    console.log(`${after === before ? 'current' : 'wrote'} ${file}`);
  }
}
