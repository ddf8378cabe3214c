/**
 * Layout version 12: `sync.table_live` also reports, per column, whether an insert that omits it
 * still gets a value (default, identity, generated) and the tables the table's foreign keys
 * reference. Capabilities publish both (`has_default`, `foreign_keys`), so a client refuses at
 * open a local table that could never push (issue 16 defect 8) instead of finding out from a
 * rejected bundle.
 *
 * A new body of a function with the same signature, whose answer only gains fields: an older
 * build reads what it knows and ignores the rest, so min_safe_version stays 11.
 */
import { type Migration } from './migration.js';
import { tableLiveSql } from '../../sync/catalog/catalog.sql.js';

export const migration0012: Migration = {
  version: 12,
  minSafeVersion: 11,
  description: 'table facts for clients: whether each column has a default, and where foreign keys point',
  functions: [tableLiveSql],
};
