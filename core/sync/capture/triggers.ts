/**
 * The reserved `_lockstep_*` triggers of a registered table: statement-level guards that refuse
 * writes outside a bundle (and every TRUNCATE), and statement-level capture with transition
 * tables into `sync.capture_rows` (functions in capture.sql.ts). Descendants (partitions,
 * inheritance children) get the guards; capture runs on the root, which sees their rows.
 */
import { quoteIdent as q, quoteLiteral } from '../../db/sql.js';

/** A registered table and its current descendants, by name. */
export interface RegisteredRelation {
  readonly schema: string;
  readonly table: string;
  readonly descendants: readonly { readonly schema: string; readonly table: string }[];
}

export interface TriggerSpec {
  readonly relation: string;
  readonly name: string;
  readonly ddl: string;
}

/** The reserved `_lockstep_*` triggers of one registered table and its descendants. */
export function triggerSpecs(info: RegisteredRelation, entry: { readonly tableId: number }): TriggerSpec[] {
  const rel = `${q(info.schema)}.${q(info.table)}`;
  const guards = (relation: string): TriggerSpec[] => [
    {
      relation,
      name: '_lockstep_guard',
      ddl: `CREATE TRIGGER _lockstep_guard BEFORE INSERT OR UPDATE OR DELETE ON ${relation} FOR EACH STATEMENT EXECUTE FUNCTION sync.guard()`,
    },
    {
      relation,
      name: '_lockstep_guard_truncate',
      ddl: `CREATE TRIGGER _lockstep_guard_truncate BEFORE TRUNCATE ON ${relation} FOR EACH STATEMENT EXECUTE FUNCTION sync.guard_truncate()`,
    },
  ];
  const id = quoteLiteral(String(entry.tableId));
  return [
    ...guards(rel),
    {
      relation: rel,
      name: '_lockstep_capture_insert',
      ddl: `CREATE TRIGGER _lockstep_capture_insert AFTER INSERT ON ${rel} REFERENCING NEW TABLE AS lockstep_new FOR EACH STATEMENT EXECUTE FUNCTION sync.capture(${id})`,
    },
    {
      relation: rel,
      name: '_lockstep_capture_update',
      ddl: `CREATE TRIGGER _lockstep_capture_update AFTER UPDATE ON ${rel} REFERENCING OLD TABLE AS lockstep_old NEW TABLE AS lockstep_new FOR EACH STATEMENT EXECUTE FUNCTION sync.capture(${id})`,
    },
    {
      relation: rel,
      name: '_lockstep_capture_delete',
      ddl: `CREATE TRIGGER _lockstep_capture_delete AFTER DELETE ON ${rel} REFERENCING OLD TABLE AS lockstep_old FOR EACH STATEMENT EXECUTE FUNCTION sync.capture(${id})`,
    },
    ...info.descendants.flatMap((d) => guards(`${q(d.schema)}.${q(d.table)}`)),
  ];
}
