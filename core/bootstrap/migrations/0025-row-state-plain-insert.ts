/**
 * Layout version 25: a commit writes the row versions of keys `row_state` never held with a plain
 * INSERT, and only the others with the upsert, in the statement that writes the bundle's rows
 * (the probe that classifies each key already knows which it is). A 10k-row commit of new keys
 * no longer pays the upsert's speculative insertion for every row (55 → 25 ms) nor a second read
 * of its bundle_rows. Same rows, versions and answers: min_safe_version stays 18.
 */
import { type Migration } from './migration.js';
import { finalizeBundleSql } from '../../sync/push/commit.sql.js';

export const migration0025: Migration = {
  version: 25,
  minSafeVersion: 18,
  description: 'row versions of new keys written by a plain insert, in the statement that writes the bundle rows',
  functions: [finalizeBundleSql],
};
