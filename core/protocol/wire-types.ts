/**
 * How each PostgreSQL column type travels on the wire (docs/protocol.md §4.2). Shared by the server's
 * generated SQL and the client's value codec, so both sides agree on every type.
 */
export type WireCategory = 'bytea' | 'decimal' | 'uuid' | 'timestamptz' | 'json' | 'boolean' | 'integer' | 'float' | 'text' | 'other';

/** The wire category of a type as `format_type` spells it (capabilities' column `type`). */
export function wireCategory(type: string): WireCategory {
  // An array travels as a JSON array of its element's wire form (protocol §4.2); the server renders
  // the elements, and the client keeps the array as JSON text. `numeric[]` is not a decimal.
  if (type.endsWith('[]')) return 'other';
  if (type === 'bytea') return 'bytea';
  if (type === 'bigint' || type.startsWith('numeric')) return 'decimal';
  if (type === 'uuid') return 'uuid';
  if (/^timestamp(\(\d+\))? with time zone$/.test(type)) return 'timestamptz';
  if (type === 'json' || type === 'jsonb') return 'json';
  if (type === 'boolean') return 'boolean';
  if (type === 'smallint' || type === 'integer') return 'integer';
  if (type === 'real' || type === 'double precision') return 'float';
  if (type === 'text' || type.startsWith('character')) return 'text';
  return 'other';
}
