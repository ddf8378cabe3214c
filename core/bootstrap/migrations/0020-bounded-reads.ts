/**
 * Layout version 20: the two reads a request made with a plain SELECT, the long poll's and
 * `/syncx/status`'s, are managed functions (`sync.watch_latest`, `sync.status_facts`), so bootstrap
 * bounds their lock waits like every other request's: while a migration or an operator held a
 * `sync` table, a watch asking to wait 1 s and a status call answered 503 only at the 22 s query
 * timeout. Older builds keep their plain SELECTs and call nothing new: min_safe_version stays 18.
 */
import { type Migration } from './migration.js';
import { statusFactsSql } from '../../sync/meta/status.sql.js';
import { watchLatestSql } from '../../sync/read/watch.sql.js';

export const migration0020: Migration = {
  version: 20,
  minSafeVersion: 18,
  description: 'the long poll and status read through managed functions that carry the lock bound',
  functions: [watchLatestSql, statusFactsSql],
};
