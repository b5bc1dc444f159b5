import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../core/config.ts';
import { readVendorDoc, renderVendorDoc, VENDOR_DOC_FILES, VENDOR_DOCS, type VendorDoc } from '../../tools/scripts/vendor-docs.ts';

/** The operator's files list the registry's vendors (tools/scripts/vendor-docs.ts; docs/architecture.md, "Adding a vendor"). */

const MISTRAL: VendorDoc = { name: 'mistral', prefix: 'MISTRAL', defaultModel: 'pixtral-large-latest', label: 'Mistral' };

describe('.env.example, docker-compose.yml and README.md', () => {
  it.each(VENDOR_DOC_FILES)('%s is what the vendor registry generates (run `npm run docs:vendors` after changing a vendor)', async (file) => {
    const committed = await readVendorDoc(file);
    expect(committed).toBe(renderVendorDoc(file, committed));
  });

  it('name every vendor variable config reads, and default models equal to config', async () => {
    const env = await readVendorDoc('.env.example');
    const compose = await readVendorDoc('docker-compose.yml');
    const readme = await readVendorDoc('README.md');
    const defaults = loadConfig({}) as unknown as Record<string, unknown>;
    expect(VENDOR_DOCS.map((v) => v.prefix)).toEqual(['OPENAI', 'ANTHROPIC', 'GEMINI']);
    for (const v of VENDOR_DOCS) {
      expect(defaults[`${v.prefix}_MODEL`]).toBe(v.defaultModel);
      for (const s of ['API_KEY', 'BASE_URL', 'MODEL', 'RPM', 'TPM']) {
        expect(env).toContain(`\n${v.prefix}_${s}=\n`);
        expect(compose).toContain(`\n    ${v.prefix}_${s}: \${${v.prefix}_${s}:-}\n`);
        expect(readme).toContain(`\`${v.prefix}_${s}\``);
      }
    }
    expect(readme).toContain('| `VENDOR_ORDER` | `openai,anthropic,google` |');
  });

  it('a vendor added to the registry gets its lines in each file, and no hand-edit there', async () => {
    const vendors = [...VENDOR_DOCS, MISTRAL];
    const env = renderVendorDoc('.env.example', await readVendorDoc('.env.example'), vendors);
    expect(env).toContain('GEMINI_API_KEY=\nMISTRAL_API_KEY=\n# <<< docs:vendors\n');
    expect(env).toContain('GEMINI_MODEL=\nMISTRAL_BASE_URL=\nMISTRAL_MODEL=\n# <<< docs:vendors\n');
    expect(env).toContain('gemini-2.5-flash, pixtral-large-latest).');
    expect(env).toContain('GEMINI_TPM=\nMISTRAL_RPM=\nMISTRAL_TPM=\n# <<< docs:vendors\n');
    const compose = renderVendorDoc('docker-compose.yml', await readVendorDoc('docker-compose.yml'), vendors);
    expect(compose).toContain('    MISTRAL_API_KEY: ${MISTRAL_API_KEY:-}\n    MISTRAL_BASE_URL: ${MISTRAL_BASE_URL:-}\n    MISTRAL_MODEL: ${MISTRAL_MODEL:-}\n    # <<< docs:vendors\n');
    expect(compose).toContain('    MISTRAL_TPM: ${MISTRAL_TPM:-}\n    # <<< docs:vendors\n');
    const readme = renderVendorDoc('README.md', await readVendorDoc('README.md'), vendors);
    expect(readme).toContain('| `GEMINI_API_KEY`, `GEMINI_BASE_URL`, `GEMINI_MODEL` | –, SDK default, `gemini-2.5-flash` | Google |\n| `MISTRAL_API_KEY`, `MISTRAL_BASE_URL`, `MISTRAL_MODEL` | –, SDK default, `pixtral-large-latest` | Mistral |\n| `VENDOR_ORDER` | `openai,anthropic,google,mistral` |');
    expect(readme).toContain('`GEMINI_TPM`, `MISTRAL_RPM`, `MISTRAL_TPM` | unset (none known) |');
    // Rendering again changes nothing: the blocks are found again where they were written.
    expect(renderVendorDoc('README.md', readme, vendors)).toBe(readme);
    expect(renderVendorDoc('.env.example', env, vendors)).toBe(env);
  });

  it('refuses a file whose block is missing rather than leaving a vendor out', () => {
    expect(() => renderVendorDoc('.env.example', 'OPENAI_API_KEY=\n')).toThrow('no block "# >>> docs:vendors keys"');
    expect(() => renderVendorDoc('README.md', '# nothing\n')).toThrow('no vendor rows');
  });
});
