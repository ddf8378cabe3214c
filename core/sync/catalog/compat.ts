/**
 * How a registered table's live declaration compares with its catalog entry. Bootstrap uses it to
 * tell additive changes (applied) from unsafe ones (refused with a recipe); request handlers use it
 * to tell drift that breaks serving (a 503 with reason `layout_drift`) from changes that only wait
 * for the next bootstrap (served as the catalog describes them).
 */

/** A column as the catalog records it (capabilities' column spec). */
export interface CatalogColumn {
  readonly name: string;
  readonly type: string;
  readonly nullable: boolean;
}

/** A column as the database declares it now. */
export interface LiveColumn {
  readonly name: string;
  readonly type: string;
  readonly notNull: boolean;
}

const VARCHAR = /^character varying(?:\((\d+)\))?$/;
const NUMERIC = /^numeric(?:\((\d+),(\d+)\))?$/;
const TIMESTAMP = /^(timestamp|time)(?:\((\d)\))? (with|without) time zone$/;
const INTEGERS = ['smallint', 'integer', 'bigint'];

/**
 * Whether changing a column from `from` to `to` (as `format_type` spells them) keeps every stored
 * value and its wire form: longer or unbounded character types, larger integers, more numeric
 * precision at the same scale, more fractional seconds, float4 → float8, json → jsonb.
 */
export function isWidening(from: string, to: string): boolean {
  if (from === to) return true;
  const fv = VARCHAR.exec(from);
  if (fv && (to === 'text' || to === 'character varying')) return true;
  const tv = VARCHAR.exec(to);
  if (fv && tv) return tv[1] === undefined || (fv[1] !== undefined && Number(tv[1]) >= Number(fv[1]));
  if (from === 'text' && to === 'character varying') return true;
  const fi = INTEGERS.indexOf(from);
  const ti = INTEGERS.indexOf(to);
  if (fi >= 0 && ti >= 0) return ti >= fi;
  const fn = NUMERIC.exec(from);
  const tn = NUMERIC.exec(to);
  if (fn && tn) return tn[1] === undefined || (fn[1] !== undefined && fn[2] === tn[2] && Number(tn[1]) >= Number(fn[1]));
  const ft = TIMESTAMP.exec(from);
  const tt = TIMESTAMP.exec(to);
  if (ft && tt && ft[1] === tt[1] && ft[3] === tt[3]) return tt[2] === undefined || (ft[2] !== undefined && Number(tt[2]) >= Number(ft[2]));
  if (from === 'real' && to === 'double precision') return true;
  if (from === 'json' && to === 'jsonb') return true;
  return false;
}

export interface ColumnComparison {
  /** Catalog columns the table no longer has (dropped, or renamed: a rename is a drop plus an add). */
  readonly dropped: readonly string[];
  /** Catalog columns whose type changed in a way that is not a widening. */
  readonly retyped: readonly { readonly name: string; readonly from: string; readonly to: string }[];
  /** Catalog columns widened (served as before until bootstrap records the new type). */
  readonly widened: readonly { readonly name: string; readonly from: string; readonly to: string }[];
  /** Columns the catalog does not know yet. */
  readonly added: readonly LiveColumn[];
  /** Catalog columns whose NOT NULL changed. */
  readonly nullability: readonly { readonly name: string; readonly nullable: boolean }[];
}

/** Compares a table's catalog columns with its live columns (the hidden scope column excluded by the caller). */
export function compareColumns(catalog: readonly CatalogColumn[], live: readonly LiveColumn[]): ColumnComparison {
  const liveByName = new Map(live.map((c) => [c.name, c]));
  const known = new Set(catalog.map((c) => c.name));
  const dropped: string[] = [];
  const retyped: { name: string; from: string; to: string }[] = [];
  const widened: { name: string; from: string; to: string }[] = [];
  const nullability: { name: string; nullable: boolean }[] = [];
  for (const c of catalog) {
    const now = liveByName.get(c.name);
    if (!now) {
      dropped.push(c.name);
      continue;
    }
    if (now.type !== c.type) (isWidening(c.type, now.type) ? widened : retyped).push({ name: c.name, from: c.type, to: now.type });
    if (now.notNull === c.nullable) nullability.push({ name: c.name, nullable: !now.notNull });
  }
  return { dropped, retyped, widened, added: live.filter((c) => !known.has(c.name)), nullability };
}
