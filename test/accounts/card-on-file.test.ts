import { afterAll, describe, expect, it } from 'vitest';
import { recordCardOnFile } from '../../accounts/card-on-file.ts';
import { getBalance } from '../../credits/ledger.ts';
import { createPool } from '../../db/pool.ts';
import { testConfig } from '../harness/env.ts';
import { createTestAccount } from '../helpers/app.ts';

const db = createPool(testConfig().DATABASE_URL);
afterAll(() => db.end());
const fp = () => `fp_${Math.random().toString(36).slice(2)}`;

describe('the card-on-file credits', () => {
  it('once per workspace and once per card; a card that earned nothing stays free to earn elsewhere', async () => {
    const a = await createTestAccount(db);
    const b = await createTestAccount(db);
    const [x, y] = [fp(), fp()];
    expect(await recordCardOnFile(db, { accountId: a.userId, fingerprint: x })).toEqual({ outcome: 'granted', granted: 4_000 });
    // The same event again, and a second card on the same workspace: nothing more.
    expect(await recordCardOnFile(db, { accountId: a.userId, fingerprint: x })).toEqual({ outcome: 'already-on-file', granted: 0 });
    expect(await recordCardOnFile(db, { accountId: a.userId, fingerprint: y })).toEqual({ outcome: 'already-on-file', granted: 0 });
    // Card x earned its credits with a; card y earned nothing there, so b may earn with it.
    expect(await recordCardOnFile(db, { accountId: b.userId, fingerprint: x })).toEqual({ outcome: 'card-used-elsewhere', granted: 0 });
    expect(await recordCardOnFile(db, { accountId: b.userId, fingerprint: y })).toEqual({ outcome: 'granted', granted: 4_000 });
    expect((await getBalance(db, a.userId)).community).toBe(4_000);
    expect((await getBalance(db, b.userId)).community).toBe(4_000);
  });

  it('two workspaces adding one card at the same moment: one earns', async () => {
    const a = await createTestAccount(db);
    const b = await createTestAccount(db);
    const x = fp();
    const results = await Promise.all([recordCardOnFile(db, { accountId: a.userId, fingerprint: x }), recordCardOnFile(db, { accountId: b.userId, fingerprint: x })]);
    expect(results.map((r) => r.granted).sort()).toEqual([0, 4_000]);
  });
});
