import { describe, expect, it } from 'vitest';
import { AppError } from '../../core/errors.ts';
import { MAX_LENS_OPTIONS_CHARS } from '../../lenses/prompt.ts';
import { MAX_LENS_OPTIONS_DEPTH, resolveLenses, type ResolveRequest } from '../../lenses/resolve.ts';

const FULL = [
  'dating', 'people', 'location', 'atmosphere', 'photo-quality', 'entities', 'composition',
  'text-content', 'accessibility', 'describe', 'condition', 'authenticity', 'color-palette', 'automobile',
];

function rejection(req: ResolveRequest): AppError {
  try {
    resolveLenses(req);
  } catch (err) {
    if (err instanceof AppError) return err;
    throw err;
  }
  throw new Error(`expected ${JSON.stringify(req)} to be rejected`);
}

describe('resolveLenses', () => {
  it('resolves a preset to its lenses with moderation first, billing everything but moderation', () => {
    const r = resolveLenses({ preset: 'full-analysis' });
    expect(r).toEqual({ stack: 'full-analysis', lenses: ['moderation', ...FULL], billable: FULL, outputSchema: 'photo', warnings: [] });
  });

  it('resolves quick-scan to moderation alone with nothing billable', () => {
    expect(resolveLenses({ preset: 'quick-scan' })).toEqual({ stack: 'quick-scan', lenses: ['moderation'], billable: [], outputSchema: 'photo', warnings: [] });
  });

  it('lets modules override preset, keeping the caller order and warning that the preset was ignored', () => {
    const r = resolveLenses({ preset: 'memorial', modules: ['location', 'dating'] });
    expect(r.stack).toBeNull();
    expect(r.lenses).toEqual(['moderation', 'location', 'dating']);
    expect(r.billable).toEqual(['location', 'dating']);
    expect(r.warnings).toEqual(['preset "memorial" ignored: modules overrides preset']);
  });

  it('treats an empty modules list as an explicit choice: only moderation runs', () => {
    expect(resolveLenses({ modules: [] })).toMatchObject({ stack: null, lenses: ['moderation'], billable: [], warnings: [] });
  });

  it('adds and removes lenses on a preset', () => {
    const r = resolveLenses({ preset: 'memorial', modulesAdd: ['color-palette', 'dating'], modulesRemove: ['accessibility', 'photo-quality'] });
    expect(r.stack).toBe('memorial');
    expect(r.lenses).toEqual(['moderation', 'dating', 'people', 'location', 'text-content', 'describe', 'color-palette']);
    expect(r.warnings).toEqual([]);
  });

  it('applies modulesAdd/modulesRemove to modules when modules is given', () => {
    const r = resolveLenses({ modules: ['describe', 'entities'], modulesAdd: ['dating'], modulesRemove: ['entities'] });
    expect(r.lenses).toEqual(['moderation', 'describe', 'dating']);
    expect(r.stack).toBeNull();
  });

  it('removes duplicates in a stable order, including a moderation the caller listed', () => {
    const r = resolveLenses({ modules: ['describe', 'moderation', 'dating', 'describe'], modulesAdd: ['dating', 'people'] });
    expect(r.lenses).toEqual(['moderation', 'describe', 'dating', 'people']);
    expect(r.billable).toEqual(['describe', 'dating', 'people']);
  });

  it('keeps moderation when asked to remove it, with a warning, and never bills it', () => {
    const r = resolveLenses({ preset: 'quick-scan', modulesRemove: ['moderation'] });
    expect(r.lenses).toEqual(['moderation']);
    expect(r.billable).toEqual([]);
    expect(r.warnings).toEqual(['modulesRemove: "moderation" always runs (free of charge) and was kept']);
  });

  it('warns when removing a lens that was not requested', () => {
    expect(resolveLenses({ preset: 'quick-scan', modulesRemove: ['people'] }).warnings).toEqual(['modulesRemove: lens "people" was not requested']);
  });

  it('defaults to full-analysis with a warning when neither preset nor modules is given, and adjusts that default', () => {
    const r = resolveLenses({});
    expect(r.stack).toBe('full-analysis');
    expect(r.lenses).toEqual(['moderation', ...FULL]);
    expect(r.warnings).toEqual(['no preset or modules given: using stack "full-analysis"']);
    expect(resolveLenses({ modulesRemove: ['automobile', 'people'] }).billable).toEqual(FULL.filter((n) => n !== 'automobile' && n !== 'people'));
  });

  it('rejects an unknown preset naming the field and the value', () => {
    const err = rejection({ preset: 'everything' });
    expect(err.code).toBe('VALIDATION_FAILED');
    expect(err.status).toBe(400);
    expect(err.message).toMatch(/^preset: unknown stack "everything"/);
  });

  it('rejects an unknown preset even when modules overrides it', () => {
    expect(rejection({ preset: 'nope', modules: ['dating'] }).message).toMatch(/^preset: unknown stack "nope"/);
  });

  it.each([
    ['modules', { modules: ['dating', 'faces'] }],
    ['modulesAdd', { preset: 'quick-scan', modulesAdd: ['faces'] }],
    ['modulesRemove', { preset: 'quick-scan', modulesRemove: ['faces'] }],
  ] as const)('rejects an unknown lens in %s naming the field and the value', (field, req) => {
    const err = rejection(req);
    expect(err.code).toBe('VALIDATION_FAILED');
    expect(err.message).toMatch(new RegExp(`^${field}: unknown lens "faces"`));
  });

  it('rejects the pipeline names of the vehicle stack as lenses, pointing at the preset', () => {
    expect(rejection({ modules: ['multi-image'] }).message).toBe(
      'modules: unknown lens "multi-image" (a step of the "vehicle-condition" stack, not a lens; use preset "vehicle-condition")',
    );
  });

  it.each([
    ['modules', { modules: ['vehicle-condition'] }],
    ['modulesAdd', { preset: 'automobile', modulesAdd: ['vehicle-condition'] }],
  ] as const)('rejects the internal vehicle-condition lens in %s', (field, req) => {
    expect(rejection(req).message).toBe(`${field}: lens "vehicle-condition" is internal and only reachable through preset "vehicle-condition"`);
  });

  it('resolves the vehicle-condition stack to the internal lens with the vehicle output schema and nothing billable per lens', () => {
    expect(resolveLenses({ preset: 'vehicle-condition' })).toEqual({
      stack: 'vehicle-condition',
      lenses: ['moderation', 'vehicle-condition'],
      billable: [],
      outputSchema: 'vehicle',
      warnings: [],
    });
  });

  it('refuses to adjust the vehicle-condition stack but accepts empty adjustment lists', () => {
    expect(rejection({ preset: 'vehicle-condition', modulesAdd: ['dating'] }).message).toMatch(/^modulesAdd: the "vehicle-condition" stack cannot be adjusted/);
    expect(rejection({ preset: 'vehicle-condition', modulesRemove: ['moderation'] }).message).toMatch(/^modulesRemove: the "vehicle-condition" stack cannot be adjusted/);
    expect(resolveLenses({ preset: 'vehicle-condition', modulesAdd: [], modulesRemove: [] }).outputSchema).toBe('vehicle');
  });

  it('lets modules override the vehicle-condition preset into a per-photo analysis', () => {
    const r = resolveLenses({ preset: 'vehicle-condition', modules: ['automobile', 'condition'] });
    expect(r).toMatchObject({ stack: null, lenses: ['moderation', 'automobile', 'condition'], outputSchema: 'photo' });
  });

  it('rejects a lens that is both added and removed', () => {
    expect(rejection({ preset: 'claims', modulesAdd: ['people'], modulesRemove: ['people'] }).message).toBe(
      'modulesAdd/modulesRemove: lens "people" is in both lists',
    );
  });

  it('bounds every lens\'s options, requested or not: depth and size (they travel in the workflow input)', () => {
    let deep: unknown = 'x';
    for (let i = 0; i < 100_000; i++) deep = [deep];
    expect(rejection({ modules: ['describe'], moduleOptions: { dating: { k: deep } } }).message).toBe(`moduleOptions.dating: nested deeper than ${MAX_LENS_OPTIONS_DEPTH} levels`);
    expect(rejection({ modules: ['describe'], moduleOptions: { describe: { k: 'a'.repeat(3_000_000) } } }).message).toBe(`moduleOptions.describe: larger than ${MAX_LENS_OPTIONS_CHARS} characters`);
    expect(resolveLenses({ modules: ['describe'], moduleOptions: { describe: { a: { b: { c: ['d'] } } } } }).warnings).toEqual([]);
  });

  it('checks moduleOptions keys: unknown lens rejected, options of a lens not requested warned about', () => {
    expect(rejection({ preset: 'quick-scan', moduleOptions: { faces: {} } }).message).toBe('moduleOptions: unknown lens "faces"');
    const r = resolveLenses({ modules: ['describe'], moduleOptions: { describe: { language: 'de' }, accessibility: { language: 'de' } } });
    expect(r.warnings).toEqual(['moduleOptions.accessibility ignored: lens not requested']);
  });
});
