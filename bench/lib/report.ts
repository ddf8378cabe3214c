/**
 * What a benchmark returns: figures (a spread of runs, optionally a baseline from the same run,
 * the ratio between them and a target) and checks (row counts and the like, so a fast wrong
 * answer cannot pass). The orchestrator prints them as one table and writes them as JSON.
 */
import { type Spread } from './stats.js';

export interface Target {
  /** Human-readable, e.g. "≥ 0.33 × baseline". */
  readonly text: string;
  readonly met: boolean;
}

export interface Figure {
  readonly id: string;
  readonly label: string;
  readonly unit: string;
  readonly value: Spread;
  readonly baseline?: { readonly label: string; readonly value: Spread };
  /** value.median / baseline.median unless the benchmark says otherwise in `ratioOf`. */
  readonly ratio?: number;
  readonly ratioOf?: string;
  readonly target?: Target;
  readonly note?: string;
}

export interface Check {
  readonly what: string;
  readonly ok: boolean;
  readonly detail: string;
}

export interface BenchResult {
  readonly name: string;
  readonly seconds: number;
  readonly figures: Figure[];
  readonly checks: Check[];
  readonly notes: string[];
  readonly error?: string;
}

/** Collects a benchmark's figures and checks. */
export class Recorder {
  readonly figures: Figure[] = [];
  readonly checks: Check[] = [];
  readonly notes: string[] = [];

  figure(f: Figure): void {
    this.figures.push(f);
  }

  check(what: string, ok: boolean, detail: string): void {
    this.checks.push({ what, ok, detail });
  }

  /** Checks `actual === expected` and records it either way. */
  expectEqual(what: string, actual: number, expected: number): void {
    this.check(what, actual === expected, `${actual} (expected ${expected})`);
  }

  note(text: string): void {
    this.notes.push(text);
  }
}

/** A number for a table cell: 3 significant digits, thousands grouped for large values. */
export function fmt(n: number | undefined): string {
  if (n === undefined || !Number.isFinite(n)) return '-';
  if (n === 0) return '0';
  const abs = Math.abs(n);
  if (abs >= 1000) return Math.round(n).toLocaleString('en-US');
  if (abs >= 100) return n.toFixed(0);
  if (abs >= 10) return n.toFixed(1);
  if (abs >= 1) return n.toFixed(2);
  return n.toPrecision(2);
}

function pad(cells: readonly string[], widths: readonly number[]): string {
  return cells.map((c, i) => (i === 0 ? c.padEnd(widths[i] as number) : c.padStart(widths[i] as number))).join(' | ');
}

/** The table: one line per figure. `markdown` adds the pipes and separator GitHub renders. */
export function formatTable(results: readonly BenchResult[], markdown = false): string {
  const header = ['figure', 'unit', 'median', 'min', 'max', 'n', 'baseline median', 'ratio', 'target', 'met'];
  const rows: string[][] = [];
  for (const r of results) {
    for (const f of r.figures) {
      rows.push([
        f.label,
        f.unit,
        fmt(f.value.median),
        fmt(f.value.min),
        fmt(f.value.max),
        String(f.value.n),
        f.baseline ? fmt(f.baseline.value.median) : '-',
        f.ratio === undefined ? '-' : `${f.ratio.toFixed(2)}×`,
        f.target?.text ?? '-',
        f.target ? (f.target.met ? 'yes' : 'NO') : '-',
      ]);
    }
  }
  if (markdown) {
    const line = (cells: readonly string[]) => `| ${cells.join(' | ')} |`;
    return [line(header), line(header.map((_, i) => (i === 0 || i === 1 || i === 8 ? '---' : '---:'))), ...rows.map(line)].join('\n');
  }
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => (row[i] as string).length)));
  return [pad(header, widths), widths.map((w) => '-'.repeat(w)).join('-+-'), ...rows.map((row) => pad(row, widths))].join('\n');
}
