import { afterAll, describe, expect, it } from 'vitest';
import { openTestDb, type TestDb } from './support/server-db.js';
import { APP_SCHEMA_SQL, APP_TABLES } from './support/schemas.js';
import { bootstrap } from '../core/bootstrap/bootstrap.js';

describe('bootstrap smoke', () => {
  let t: TestDb;
  afterAll(async () => t?.close());
  it('creates the layout and verifies it on restart', async () => {
    t = await openTestDb({ schemaSql: APP_SCHEMA_SQL });
    const first = await bootstrap(t.db, { tables: APP_TABLES });
    expect(first.created).toBe(true);
    const second = await bootstrap(t.db, { tables: APP_TABLES });
    expect(second.created).toBe(false);
  });
});
