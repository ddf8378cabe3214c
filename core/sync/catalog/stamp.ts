/**
 * The catalog's version as one cheap read (two keys of `sync.meta`): what a request reads to learn
 * whether the catalog a container holds is still current, without loading it. Bootstrap raises
 * `schema_version` with every change clients see, and `layout_version` with every migration.
 */
import { sql, type Queryable } from '../../db/index.js';

export interface CatalogStamp {
  readonly layoutVersion: number;
  readonly schemaVersion: number;
}

/** The database's catalog stamp, in one statement. */
export async function readCatalogStamp(db: Queryable): Promise<CatalogStamp> {
  const [row] = await db.query<{ layout: string | null; schema: string | null }>(sql`
    SELECT (SELECT value FROM sync.meta WHERE key = 'layout_version') AS layout,
           (SELECT value FROM sync.meta WHERE key = 'schema_version') AS schema`);
  return { layoutVersion: Number(row?.layout ?? 0), schemaVersion: Number(row?.schema ?? 1) };
}

/** Whether a loaded catalog still describes the database with this stamp. */
export function stampMatches(catalog: CatalogStamp, stamp: CatalogStamp): boolean {
  return catalog.layoutVersion === stamp.layoutVersion && catalog.schemaVersion === stamp.schemaVersion;
}
