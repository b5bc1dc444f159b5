import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import { setCardOnFile } from '../../accounts/card-on-file.ts';
import { createEmailVerification, verifyEmail } from '../../accounts/email-verification.ts';
import { getAccount } from '../../accounts/users.ts';
import { publishEviction } from '../../auth/eviction-bus.ts';
import { findAccountByEmail, issueKey, listKeys, revokeKey, accountExists } from '../../auth/repository.ts';
import { createBillingAccount } from '../../accounts/billing-accounts.ts';
import { AppError } from '../../core/errors.ts';
import { loadConfig } from '../../core/config.ts';
import { checkInvariants, getBalance, grant } from '../../credits/ledger.ts';
import { PACK_NAMES, PACKS } from '../../credits/price-book.ts';
import { purchasePack } from '../../payments/purchase.ts';
import { RecordingPaymentGateway } from '../../payments/recording-gateway.ts';
import { createDatabaseIfMissing, migrate } from '../../db/migrate.ts';
import { createPool } from '../../db/pool.ts';

const USAGE = `Usage: npm run admin -- <command> [options]

  user create --email <email>                 create a user with a live and a test key; prints JSON
  user show --user <userId>                   the user, their flags and credit balance
  user email-token --user <userId>            mint an e-mail verification token (single use, 24 h)
  user verify-email --token <token>           verify with a token: grants 1,000 community credits once ever
  user card-on-file --user <userId>           record a card on file: grants 4,000 community credits once ever
  key issue --user <userId> --kind live|test [--name <name>]
                                              issue a key; prints JSON with the key (shown once)
  key list --user <userId>                    list a user's keys (prefix and last 4 only)
  key revoke --key-id <keyId>                 revoke a key and evict it from every API process
  packs list                                  the credit packs and their prices
  credits buy --user <userId> --pack ${PACK_NAMES.join('|')} [--idempotency-key <k>]
                                              buy a pack through the recording payment gateway (no card
                                              is charged; the capture is recorded); 2x on the first pack
  credits grant --user <userId> --pool community|purchased --amount <n> [--idempotency-key <k>] [--note <text>]
  ledger check [--user <userId>]              verify granted + purchased = balances + reserved + charged
`;

class UsageError extends Error {}

const { positionals, values } = parseArgs({
  allowPositionals: true,
  options: {
    email: { type: 'string' },
    user: { type: 'string' },
    kind: { type: 'string' },
    'key-id': { type: 'string' },
    pool: { type: 'string' },
    amount: { type: 'string' },
    'idempotency-key': { type: 'string' },
    note: { type: 'string' },
    name: { type: 'string' },
    token: { type: 'string' },
    pack: { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  },
});

const need = (name: keyof typeof values): string => {
  const v = values[name];
  if (typeof v !== 'string' || v === '') throw new UsageError(`missing --${name}`);
  return v;
};

const config = loadConfig();
const print = (v: unknown) => process.stdout.write(JSON.stringify(v) + '\n');

async function main(): Promise<number> {
  const [group, action] = positionals;
  if (values.help || !group) {
    process.stdout.write(USAGE);
    return values.help ? 0 : 2;
  }
  await createDatabaseIfMissing(config.DATABASE_URL);
  await migrate(config.DATABASE_URL);
  const db = createPool(config.DATABASE_URL, { max: 2, application: 'lenstack-admin' });
  try {
    const requireAccount = async () => {
      const accountId = need('user');
      if (!(await accountExists(db, accountId))) throw new UsageError(`no user ${accountId}`);
      return accountId;
    };
    switch (`${group} ${action ?? ''}`.trim()) {
      case 'user create': {
        const email = need('email');
        if (!/^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(email)) throw new UsageError(`not an e-mail address: ${email}`);
        if (await findAccountByEmail(db, email)) throw new UsageError(`a user with e-mail ${email} exists`);
        const { accountId } = await createBillingAccount(db, email);
        const live = await issueKey(db, accountId, 'live', 'default live key');
        const test = await issueKey(db, accountId, 'test', 'default test key');
        print({ userId: accountId, liveKey: live.key, testKey: test.key });
        return 0;
      }
      case 'user show': {
        const accountId = await requireAccount();
        print({ ...(await getAccount(db, accountId)), credits: await getBalance(db, accountId) });
        return 0;
      }
      case 'user email-token':
        print(await createEmailVerification(db, { accountId: await requireAccount() }));
        return 0;
      case 'user verify-email':
        print(await verifyEmail(db, { token: need('token') }));
        return 0;
      case 'user card-on-file':
        print(await setCardOnFile(db, { accountId: await requireAccount() }));
        return 0;
      case 'key issue': {
        const accountId = await requireAccount();
        const kind = need('kind');
        if (kind !== 'live' && kind !== 'test') throw new UsageError('--kind must be live or test');
        const k = await issueKey(db, accountId, kind, values.name ?? null);
        print({ userId: accountId, keyId: k.keyId, key: k.key });
        return 0;
      }
      case 'key list':
        print(await listKeys(db, await requireAccount()));
        return 0;
      case 'key revoke': {
        const revoked = await revokeKey(db, need('key-id'));
        if (!revoked) throw new UsageError(`no key ${values['key-id']}`);
        // Every API process listens on this channel and drops the key from its cache at once.
        const receivers = await publishEviction(config.REDIS_URL, config.REDIS_PREFIX, { keyHash: revoked.keyHash });
        print({ keyId: values['key-id'], revoked: true, apiProcessesNotified: receivers });
        return 0;
      }
      case 'packs list':
        print(Object.values(PACKS));
        return 0;
      case 'credits buy': {
        const accountId = await requireAccount();
        const pack = need('pack');
        const idempotencyKey = values['idempotency-key'] ?? `admin:${randomUUID()}`;
        const { purchase } = await purchasePack({ db, payments: new RecordingPaymentGateway(db) }, { accountId, pack, idempotencyKey });
        print(purchase);
        return purchase.status === 'granted' ? 0 : 1;
      }
      case 'credits grant': {
        const accountId = await requireAccount();
        const pool = need('pool');
        if (pool !== 'community' && pool !== 'purchased') throw new UsageError('--pool must be community or purchased');
        const amount = Number(need('amount'));
        if (!Number.isSafeInteger(amount) || amount <= 0) throw new UsageError('--amount must be a positive integer');
        const idempotencyKey = values['idempotency-key'] ?? `admin:${randomUUID()}`;
        const applied = await grant(db, { accountId, pool, amount, idempotencyKey, note: values.note ?? 'admin grant' });
        print({ userId: accountId, pool, amount, idempotencyKey, applied });
        return 0;
      }
      case 'ledger check': {
        const reports = await checkInvariants(db, values.user);
        const bad = reports.filter((r) => !r.ok);
        print({ usersChecked: reports.length, ok: bad.length === 0, problems: bad });
        return bad.length === 0 ? 0 : 1;
      }
      default:
        throw new UsageError(`unknown command: ${positionals.join(' ')}`);
    }
  } finally {
    await db.end();
  }
}

try {
  process.exitCode = await main();
} catch (err) {
  if (err instanceof AppError && err.status < 500) {
    // Refused by the domain (unknown user, used token, unknown pack): say why, no usage dump.
    process.stderr.write(`admin: ${err.message}\n`);
    process.exitCode = 2;
  } else if (err instanceof UsageError) {
    process.stderr.write(`admin: ${err.message}\n\n${USAGE}`);
    process.exitCode = 2;
  } else {
    process.stderr.write(`admin: ${(err as Error).message}\n`);
    process.exitCode = 1;
  }
}
