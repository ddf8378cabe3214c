/**
 * Issue 3, the `npm run bootstrap` CLI (dev/bootstrap-cli.ts) as a process: its exit codes and
 * what it prints, against a fresh database on the direct URL. It runs on pg16 and pg17 only: the
 * CLI opens its own connection to the URL it is given, so under pgbouncer17 and neon17 (whose
 * difference is the runtime's request pool) it would repeat pg17's run exactly.
 */
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openTestDb } from './support/server-db.js';
import { APP_SCHEMA_SQL } from './support/schemas.js';
import { scratchDir } from './support/scratch.js';

function runCli(env: Record<string, string>, args: readonly string[] = []): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'dev/bootstrap-cli.ts', ...args], {
      env: { ...process.env, DATABASE_URL: '', SYNC_TABLES: '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('npm run bootstrap (dev/bootstrap-cli.ts)', () => {
  it('exits 0 when ready; 2 unsupported_schema, 4 unsafe_schema_change (accepted with --accept, DDL with --sql), 3 managed_layout_mismatch', async () => {
    const t = await openTestDb({ schemaSql: APP_SCHEMA_SQL + 'CREATE TABLE app.loose (id uuid, _sync_scope_id text NOT NULL, UNIQUE (_sync_scope_id, id));' });
    try {
      const env = { DATABASE_URL: t.url, SYNC_TABLES: 'app.lists:id,app.items:id,app.kinds:code' };
      const bad = await runCli({ ...env, SYNC_TABLES: `${env.SYNC_TABLES},app.loose:id` });
      expect(bad.code, bad.stderr).not.toBe(0);
      expect(bad.stderr).toMatch(/^unsupported_schema: /m);
      expect(bad.stderr).toContain('[rule 1] app.loose (id)');
      const created = await runCli(env);
      expect(created.code, created.stderr).toBe(0);
      expect(created.stdout).toMatch(/created the sync layout/);
      const again = await runCli(env);
      expect(again.code, again.stderr).toBe(0);
      expect(again.stdout).toMatch(/nothing changed/);
      // An unsafe change: exit 4 naming it with its recipe; accepted as a contract step (with
      // the application's own DDL run in bootstrap's transaction), exit 0 and applied.
      await t.exec('ALTER TABLE app.items DROP COLUMN attachment');
      const unsafe = await runCli(env);
      expect(unsafe.code, unsafe.stderr).toBe(4);
      expect(unsafe.stderr).toMatch(/^unsafe_schema_change: /m);
      expect(unsafe.stderr).toContain('drop-column:app.items.attachment');
      const file = join(scratchDir('cli'), 'change.sql');
      writeFileSync(file, 'ALTER TABLE app.lists ADD COLUMN note text;');
      const accepted = await runCli(env, ['--accept', 'drop-column:app.items.attachment', '--sql', file]);
      expect(accepted.code, accepted.stderr).toBe(0);
      expect(accepted.stdout).toMatch(/schema version 2/);
      expect(accepted.stdout).toMatch(/applied: new column app\.lists\.note/);
      await t.exec('DROP INDEX sync.push_sessions_expires_idx');
      const drift = await runCli(env);
      expect(drift.code).not.toBe(0);
      expect(drift.stderr).toMatch(/^managed_layout_mismatch: /m);
      expect(drift.stderr).toContain('push_sessions_expires_idx');
    } finally {
      await t.close();
    }
  });
});
