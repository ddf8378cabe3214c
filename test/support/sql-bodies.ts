/**
 * Static reading of managed SQL (function bodies, the catalog's generated per-table SQL) for the
 * scale-out readiness checks (test/scale-readiness.pg.test.ts): which names are not
 * schema-qualified, which global counters, sequences and locks a body touches, which managed
 * functions it calls. A tokenizer, not a parser: comments and single-quoted strings are left out
 * (messages; the little dynamic SQL in them is exercised by the search_path = '' run), dollar-quoted
 * strings inside a body are read as SQL (dynamic statements built with format).
 */

export interface Token {
  readonly text: string;
  /** The token was a quoted identifier ("name"). */
  readonly quoted: boolean;
}

/** Tokens of SQL text: identifiers (quoted or not), numbers, punctuation; comments and '…' strings dropped. */
export function tokenize(text: string): Token[] {
  const out: Token[] = [];
  let i = 0;
  while (i < text.length) {
    const c = text[i] as string;
    const next = text[i + 1];
    if (/\s/.test(c)) i++;
    else if (c === '-' && next === '-') while (i < text.length && text[i] !== '\n') i++;
    else if (c === '/' && next === '*') {
      const end = text.indexOf('*/', i + 2);
      i = end < 0 ? text.length : end + 2;
    } else if (c === "'") {
      // E'…' escapes with backslashes; both forms double a quote.
      const escapes = out.length > 0 && /^[eE]$/.test(out[out.length - 1]?.text ?? '') && text[i - 1] !== ' ';
      let j = i + 1;
      for (; j < text.length; j++) {
        if (escapes && text[j] === '\\') j++;
        else if (text[j] === "'") {
          if (text[j + 1] === "'") j++;
          else break;
        }
      }
      i = j + 1;
    } else if (c === '"') {
      let j = i + 1;
      for (; j < text.length; j++) {
        if (text[j] === '"') {
          if (text[j + 1] === '"') j++;
          else break;
        }
      }
      out.push({ text: text.slice(i + 1, j).replace(/""/g, '"'), quoted: true });
      i = j + 1;
    } else if (c === '$' && /[A-Za-z_$]/.test(next ?? '')) {
      // A dollar quote ($q$ … $q$): its content is SQL here; read on past the opening tag.
      const tag = /^\$[A-Za-z_]*\$/.exec(text.slice(i));
      i += tag ? tag[0].length : 1;
    } else if (/[A-Za-z_]/.test(c)) {
      const m = /^[A-Za-z_][A-Za-z_0-9$]*/.exec(text.slice(i)) as RegExpExecArray;
      out.push({ text: m[0], quoted: false });
      i += m[0].length;
    } else if (/[0-9]/.test(c)) {
      const m = /^[0-9.]+/.exec(text.slice(i)) as RegExpExecArray;
      out.push({ text: m[0], quoted: false });
      i += m[0].length;
    } else {
      out.push({ text: c, quoted: false });
      i++;
    }
  }
  return out;
}

/**
 * Words that are followed by "(" without being function calls, or are SQL's own functional
 * forms (COALESCE, GREATEST …), or types with a modifier.
 */
const NOT_CALLS = new Set(
  `in exists values any all some array row coalesce nullif greatest least case when then else and or not on using over filter
   partition as from join lateral select where into returns table declare begin if elsif loop return query execute perform raise
   exception with recursive ordinality cast extract position substring trim overlay conflict do update set insert delete by order
   group limit offset having union distinct null is between like ilike for of window rows range numeric decimal varchar char
   character bit interval timestamp time returning end collate only default key while foreach strict`.split(/\s+/),
);

/** Functional forms whose arguments say `FROM` without naming a relation. */
const FROM_INSIDE = new Set(['extract', 'substring', 'trim', 'overlay', 'position']);

const RELATION_AFTER = new Set(['from', 'join', 'update']);

export interface NameFinding {
  readonly kind: 'function' | 'relation';
  readonly name: string;
}

/**
 * Names a body uses without a schema: function calls not in pg_catalog (`builtins`), and
 * relations after FROM / JOIN / UPDATE / INSERT INTO / DELETE FROM that are neither qualified,
 * nor a CTE of the body, nor a transition table (`allowedRelations`).
 */
export function unqualifiedNames(text: string, builtins: ReadonlySet<string>, allowedRelations: ReadonlySet<string>): NameFinding[] {
  const tokens = tokenize(text);
  const lower = (k: number): string => (tokens[k]?.quoted ? '' : (tokens[k]?.text ?? '').toLowerCase());
  const ctes = new Set<string>();
  for (let k = 0; k + 2 < tokens.length; k++) {
    if (lower(k + 1) === 'as' && (tokens[k + 2]?.text === '(' || (lower(k + 2) === 'materialized' && tokens[k + 3]?.text === '('))) ctes.add(lower(k));
    // WITH [RECURSIVE] name(columns) AS (…)
    if (['with', 'recursive'].includes(lower(k)) && tokens[k + 2]?.text === '(') ctes.add(lower(k + 1));
  }
  const out: NameFinding[] = [];
  const stack: string[] = [];
  for (let k = 0; k < tokens.length; k++) {
    const t = tokens[k] as Token;
    if (t.text === '(' && !t.quoted) {
      stack.push(lower(k - 1));
      continue;
    }
    if (t.text === ')' && !t.quoted) {
      stack.pop();
      continue;
    }
    const word = lower(k);
    const qualifiedBefore = tokens[k - 1]?.text === '.' && !tokens[k - 1]?.quoted;
    // A call: name( — not after a dot (qualified), not an alias with a column list (after AS,
    // ORDINALITY or a closing parenthesis), not a keyword form.
    if (!t.quoted && /^[a-z_]/i.test(t.text) && tokens[k + 1]?.text === '(' && !qualifiedBefore) {
      const before = lower(k - 1);
      const aliasList = before === 'as' || before === 'ordinality' || tokens[k - 1]?.text === ')' || ctes.has(word);
      if (!NOT_CALLS.has(word) && !builtins.has(word) && !aliasList) out.push({ kind: 'function', name: t.text });
    }
    const insertInto = word === 'into' && lower(k - 1) === 'insert';
    const deleteFrom = word === 'from' && lower(k - 1) === 'delete';
    // Not relations: IS DISTINCT FROM x, FOR UPDATE OF x, ON CONFLICT DO UPDATE SET.
    const notRelation = (word === 'from' && lower(k - 1) === 'distinct') || (word === 'update' && ['for', 'do'].includes(lower(k - 1)));
    if ((RELATION_AFTER.has(word) || insertInto || deleteFrom) && !notRelation && !FROM_INSIDE.has(stack[stack.length - 1] ?? '')) {
      let n = k + 1;
      while (['only', 'lateral'].includes(lower(n))) n++;
      const target = tokens[n];
      if (!target || target.text === '(' || (!target.quoted && !/^[a-z_]/i.test(target.text))) continue;
      const name = target.quoted ? target.text : target.text.toLowerCase();
      const qualified = tokens[n + 1]?.text === '.';
      const call = tokens[n + 1]?.text === '(';
      if (!qualified && !call && !ctes.has(name) && !allowedRelations.has(name)) {
        out.push({ kind: 'relation', name: target.text });
      }
    }
  }
  return out;
}

/** SQL text without its comments (`--` and block comments), string literals kept as they are. */
export function withoutComments(text: string): string {
  let out = '';
  for (let i = 0; i < text.length; ) {
    const c = text[i] as string;
    if (c === '-' && text[i + 1] === '-') {
      while (i < text.length && text[i] !== '\n') i++;
    } else if (c === '/' && text[i + 1] === '*') {
      const end = text.indexOf('*/', i + 2);
      i = end < 0 ? text.length : end + 2;
      out += ' ';
    } else if (c === "'") {
      let j = i + 1;
      for (; j < text.length; j++) {
        if (text[j] === "'") {
          if (text[j + 1] === "'") j++;
          else break;
        }
      }
      out += text.slice(i, j + 1);
      i = j + 1;
    } else {
      out += c;
      i++;
    }
  }
  return out;
}

/** Global counters, sequences, locks and notification a body touches, as `what(argument)`. */
export function globalEffects(body: string): string[] {
  // Messages and hints are not statements: string literals go, unless they are a function's
  // first argument (nextval('sync.x'), pg_notify('channel', …)).
  const code = withoutComments(body);
  const text = code.replace(/'(?:[^']|'')*'/g, (literal, at: number) => (/\(\s*$/.test(code.slice(Math.max(0, at - 8), at)) ? literal : "''"));
  const found: string[] = [];
  const patterns: [RegExp, (m: RegExpExecArray) => string][] = [
    [/\b(nextval|setval|currval)\s*\(\s*'([^']+)'/gi, (m) => `${(m[1] as string).toLowerCase()}(${m[2]})`],
    [/\blastval\s*\(/gi, () => 'lastval()'],
    [/\b(pg_(?:try_)?advisory_(?:xact_)?lock(?:_shared)?)\s*\(/gi, (m) => `${(m[1] as string).toLowerCase()}()`],
    [/\bpg_notify\s*\(\s*'([^']+)'/gi, (m) => `pg_notify(${m[1]})`],
    [/\bNOTIFY\s+\w+/g, (m) => m[0]],
    [/\bLOCK\s+TABLE\b/gi, () => 'LOCK TABLE'],
    [/\bFROM\s+pg_locks\b/gi, () => 'reads pg_locks'],
  ];
  for (const [re, name] of patterns) for (let m = re.exec(text); m; m = re.exec(text)) found.push(name(m));
  return [...new Set(found)].sort();
}

/** The managed functions a body calls (`sync.name(`), among `known` names. */
export function calledFunctions(text: string, known: ReadonlySet<string>): string[] {
  const out = new Set<string>();
  for (const m of text.matchAll(/\bsync\.([a-z_0-9]+)\s*\(/g)) {
    const name = `sync.${m[1] as string}`;
    if (known.has(name)) out.add(name);
  }
  return [...out].sort();
}
