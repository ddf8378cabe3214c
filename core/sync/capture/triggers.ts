/**
 * The reserved `_lockstep_*` triggers of a registered table: statement-level guards that refuse
 * writes outside a bundle (and every TRUNCATE), and statement-level capture with transition
 * tables into `sync.capture_rows` (functions in capture.sql.ts), and a row trigger that refuses
 * a change of the sync key or scope. Descendants (partitions, inheritance children) get the
 * guards; capture runs on the root, which sees their rows.
 */
import { quoteIdent as q, quoteLiteral } from '../../db/sql.js';
import { FIXED_KEY_TRIGGER, SCOPE_COLUMN } from '../catalog/names.js';

/** A registered table and its current descendants, by name. */
export interface RegisteredRelation {
  readonly schema: string;
  readonly table: string;
  /** `p` for a partitioned table, whose row triggers PostgreSQL clones onto every partition. */
  readonly relkind?: string;
  /** The sync key column; absent, no fixed-key trigger (a caller that only drops triggers). */
  readonly keyColumn?: string;
  readonly descendants: readonly { readonly schema: string; readonly table: string }[];
}

/**
 * A sync key and `_sync_scope_id` never change (docs/protocol.md §11, rule 9): a row trigger
 * BEFORE UPDATE OF those columns refuses a change before the row is written, so no ON UPDATE
 * action of a foreign key to them ever runs. Its WHEN clause is evaluated only when an UPDATE
 * sets one of them (a push's upsert sets neither), and calls the function only for a change.
 */
export function fixedKeyTrigger(relation: string, keyColumn: string): TriggerSpec {
  const key = q(keyColumn);
  return {
    relation,
    name: FIXED_KEY_TRIGGER,
    ddl: `CREATE TRIGGER ${FIXED_KEY_TRIGGER} BEFORE UPDATE OF ${key}, ${q(SCOPE_COLUMN)} ON ${relation} FOR EACH ROW ` +
      `WHEN (OLD.${key} IS DISTINCT FROM NEW.${key} OR OLD.${q(SCOPE_COLUMN)} IS DISTINCT FROM NEW.${q(SCOPE_COLUMN)}) ` +
      `EXECUTE FUNCTION sync.refuse_key_change(${quoteLiteral(keyColumn)})`,
  };
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
    // A partitioned root's row trigger is cloned onto its partitions; inheritance children need their own.
    ...(info.keyColumn === undefined ? [] : [
      fixedKeyTrigger(rel, info.keyColumn),
      ...(info.relkind === 'p' ? [] : info.descendants.map((d) => fixedKeyTrigger(`${q(d.schema)}.${q(d.table)}`, info.keyColumn as string))),
    ]),
  ];
}
