/**
 * A numbered step of the `sync` layout. Migrations only ever get added: a database at version N
 * applies N+1, N+2, … in order, and a fresh database applies all of them, so both end with the same
 * layout (test/layout-upgrade.pg.test.ts compares the two catalogs).
 *
 * Order inside one migration: drop the functions it replaces with another signature, run its
 * statements (DDL and data changes), (re)create its functions, then run what needs them
 * (`afterFunctions`: triggers). Bodies are not checked at creation (`check_function_bodies` is
 * off while migrating), so a function may name objects that a later migration of the same run
 * creates.
 */
import { type ManagedFunction } from '../../layout/managed-sql.js';

export interface Migration {
  readonly version: number;
  /**
   * The oldest build (by its LAYOUT_VERSION) that may still serve the database after this
   * migration. Keep it at the previous version when the migration only adds (new tables, new
   * columns with defaults, new functions, new bodies of functions with unchanged signatures and
   * meaning); raise it when an older build would misbehave.
   */
  readonly minSafeVersion: number;
  readonly description: string;
  /** `sync.name(argument types)` of functions to drop first (IF EXISTS). */
  readonly dropFunctions?: readonly string[];
  /** Trusted DDL and data changes, run with the simple protocol, in order. */
  readonly statements?: readonly string[];
  /** Functions (re)created after the statements, with CREATE OR REPLACE. */
  readonly functions?: readonly ManagedFunction[];
  /** Trusted DDL run after the functions: triggers that execute this migration's functions. */
  readonly afterFunctions?: readonly string[];
}
