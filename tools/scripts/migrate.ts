import { loadConfig } from '../../core/config.ts';
import { createDatabaseIfMissing, migrate } from '../../db/migrate.ts';

const config = loadConfig();
if (await createDatabaseIfMissing(config.DATABASE_URL)) console.log('created database');
await migrate(config.DATABASE_URL, (m) => console.log(m));
console.log('migrations applied');
