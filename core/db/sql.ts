/**
 * SQL as parameterised tagged templates. `sql` turns interpolations into `$n` parameters;
 * identifiers go through `ident` (the one quoting helper) and trusted fragments through `raw`.
 * Fragments nest, so queries compose without string concatenation of values.
 */
export class SqlFragment {
  constructor(
    readonly strings: readonly string[],
    readonly values: readonly unknown[],
  ) {}

  /** Renders to `{text, values}` with `$1..$n` placeholders, flattening nested fragments. */
  toQuery(): { text: string; values: unknown[] } {
    const values: unknown[] = [];
    const text = render(this, values);
    return { text, values };
  }
}

class RawFragment {
  constructor(readonly text: string) {}
}

function render(fragment: SqlFragment, values: unknown[]): string {
  let text = fragment.strings[0] ?? '';
  fragment.values.forEach((value, i) => {
    if (value instanceof SqlFragment) text += render(value, values);
    else if (value instanceof RawFragment) text += value.text;
    else {
      values.push(value);
      text += `$${values.length}`;
    }
    text += fragment.strings[i + 1] ?? '';
  });
  return text;
}

export function sql(strings: TemplateStringsArray, ...values: unknown[]): SqlFragment {
  return new SqlFragment(strings, values);
}

/** Quotes an SQL identifier (table, column, schema) the way PostgreSQL's quote_ident does. */
export function quoteIdent(name: string): string {
  if (name.includes('\u0000')) throw new Error('identifier contains NUL');
  return `"${name.replaceAll('"', '""')}"`;
}

/** A quoted identifier, or a dotted `schema.name` pair, as a fragment. */
export function ident(...parts: string[]): RawFragment {
  return new RawFragment(parts.map(quoteIdent).join('.'));
}

/** A trusted SQL fragment written by this code base, never by a client. */
export function raw(text: string): RawFragment {
  return new RawFragment(text);
}

/** Joins fragments with a separator, e.g. a column list. */
export function join(fragments: readonly (SqlFragment | RawFragment)[], separator = ', '): SqlFragment {
  if (fragments.length === 0) return sql``;
  const strings = ['', ...fragments.slice(1).map(() => separator), ''];
  return new SqlFragment(strings, fragments);
}

/** Quotes a string literal for the simple query protocol (standard_conforming_strings on). */
export function quoteLiteral(value: string): string {
  if (value.includes('\u0000')) throw new Error('literal contains NUL');
  return `'${value.replaceAll("'", "''")}'`;
}
