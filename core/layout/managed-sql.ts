/**
 * Managed SQL: the functions of the `sync` schema as values the migrations install. Each one is
 * defined beside the TypeScript that calls it (core/sync/<concept>/*.sql.ts); only migrations
 * import those modules, so request bundles carry function names, never their text.
 *
 * A function's identity for versioning is its normalized text: comments and runs of whitespace
 * removed outside string literals. Editing a comment or reformatting changes nothing; any other
 * edit changes the hash that `core/bootstrap/migrations/function-hashes.json` records for the
 * migration that last installed it, and `test/layout-migrations.test.ts` then asks for a new
 * migration.
 */
import { createHash } from 'node:crypto';

export interface ManagedFunction {
  /** `sync.name`. */
  readonly name: string;
  /** `sync.name(argument types)`, as DROP FUNCTION takes it. */
  readonly signature: string;
  /** The full `CREATE OR REPLACE FUNCTION …` statement. */
  readonly sql: string;
}

/**
 * SQL text without comments and with every run of whitespace outside string literals (quoted
 * strings, E-strings, quoted identifiers) made one space. Dollar quotes are not literals here:
 * the bodies they delimit are SQL or PL/pgSQL, whose comments are comments too.
 */
export function normalizeSql(text: string): string {
  let out = '';
  let space = false;
  const emit = (s: string): void => {
    if (space && out !== '') out += ' ';
    space = false;
    out += s;
  };
  for (let i = 0; i < text.length; ) {
    const c = text[i] as string;
    const next = text[i + 1];
    if (c === '-' && next === '-') {
      while (i < text.length && text[i] !== '\n') i++;
      space = true;
    } else if (c === '/' && next === '*') {
      const end = text.indexOf('*/', i + 2);
      i = end < 0 ? text.length : end + 2;
      space = true;
    } else if (/\s/.test(c)) {
      space = true;
      i++;
    } else if (c === "'" || c === '"') {
      // E'…' strings escape with backslashes; standard strings and identifiers by doubling.
      const escapes = c === "'" && !space && /(^|[^A-Za-z0-9_$])[eE]$/.test(out);
      let j = i + 1;
      for (; j < text.length; j++) {
        if (escapes && text[j] === '\\') j++;
        else if (text[j] === c) {
          if (text[j + 1] === c) j++;
          else break;
        }
      }
      emit(text.slice(i, j + 1));
      i = j + 1;
    } else {
      emit(c);
      i++;
    }
  }
  return out;
}

/** Lowercase hex SHA-256 of the normalized text. */
export function sqlHash(text: string): string {
  return createHash('sha256').update(normalizeSql(text)).digest('hex');
}

/** Splits a parameter list at its top-level commas. */
function splitTopLevel(list: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < list.length; i++) {
    const c = list[i];
    if (c === '(') depth++;
    else if (c === ')') depth--;
    else if (c === ',' && depth === 0) {
      parts.push(list.slice(start, i));
      start = i + 1;
    }
  }
  if (list.slice(start).trim() !== '') parts.push(list.slice(start));
  return parts.map((p) => p.trim());
}

/** A parameter's type: `p_name type [DEFAULT …]` → `type`. */
function parameterType(parameter: string): string {
  const withoutDefault = parameter.replace(/\s+(DEFAULT|=)\s+[\s\S]*$/i, '').trim();
  const words = withoutDefault.split(/\s+/);
  const mode = /^(IN|OUT|INOUT|VARIADIC)$/i.test(words[0] ?? '') ? words.slice(1) : words;
  return mode.slice(1).join(' ');
}

/** Declares a managed function from its `CREATE OR REPLACE FUNCTION sync.x(…) …` text. */
export function managedFunction(sql: string): ManagedFunction {
  const text = sql.trim();
  const head = /^CREATE OR REPLACE FUNCTION (sync\.[a-z_0-9]+)\(/.exec(text);
  if (!head) throw new Error(`a managed function starts with CREATE OR REPLACE FUNCTION sync.<name>(: ${text.slice(0, 80)}`);
  let depth = 1;
  let i = head[0].length;
  for (; i < text.length && depth > 0; i++) {
    if (text[i] === '(') depth++;
    else if (text[i] === ')') depth--;
  }
  const parameters = splitTopLevel(text.slice(head[0].length, i - 1)).map(parameterType);
  const name = head[1] as string;
  return { name, signature: `${name}(${parameters.join(', ')})`, sql: text };
}
