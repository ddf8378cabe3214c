/**
 * Comments cite the protocol by section of docs/protocol.md, the one protocol document in the
 * repository. Every such citation must name a section that exists (a heading `## N.` or
 * `### N.M`, or item M of a numbered list under `## N.`), and nothing may cite the documents
 * that are not in the repository ("contract §N", "specification rule N") any more.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../infra/build.js';

function sections(markdown: string): Set<string> {
  const found = new Set<string>();
  let chapter: string | undefined;
  for (const line of markdown.split('\n')) {
    const h2 = /^## (\d+)\./.exec(line);
    const h3 = /^### (\d+\.\d+)/.exec(line);
    const item = /^(\d+)\. /.exec(line);
    if (h2) found.add((chapter = h2[1] as string));
    else if (h3) found.add(h3[1] as string);
    else if (item && chapter) found.add(`${chapter}.${item[1]}`);
  }
  return found;
}

const doc = readFileSync(join(ROOT, 'docs', 'protocol.md'), 'utf8');
const known = sections(doc);
const files = execFileSync('git', ['ls-files', '*.ts', '*.md', '*.yaml'], { cwd: ROOT, encoding: 'utf8' })
  .split('\n')
  .filter((f) => f && f !== 'docs/protocol.md' && f !== 'test/protocol-doc.test.ts' && !f.startsWith('test/fixtures/'));

describe('docs/protocol.md and the comments that cite it', () => {
  it('has the sections the code cites', () => {
    const missing: string[] = [];
    let citations = 0;
    for (const file of files) {
      const text = readFileSync(join(ROOT, file), 'utf8').replace(/\n\s*\*\s*/g, ' ');
      // "docs/protocol.md §5.2, §10.1–§10.2" and "protocol §5.7": every § number in the run.
      for (const match of text.matchAll(/(?:docs\/protocol\.md|protocol) ((?:§[\d.]*\d(?:[–-]§?[\d.]*\d)?(?:, )?)+)/g)) {
        for (const ref of (match[1] as string).matchAll(/§([\d.]*\d)/g)) {
          citations++;
          if (!known.has(ref[1] as string)) missing.push(`${file}: §${ref[1]}`);
        }
      }
    }
    expect(missing).toEqual([]);
    expect(citations).toBeGreaterThan(30);
  });

  it('no comment cites the documents outside the repository', () => {
    const stale: string[] = [];
    for (const file of files) {
      readFileSync(join(ROOT, file), 'utf8')
        .split('\n')
        .forEach((line, i) => {
          if (/contract ?\(?§|specification (items?|rules?) \d|specification "|specification's/.test(line)) stale.push(`${file}:${i + 1}: ${line.trim()}`);
        });
    }
    expect(stale).toEqual([]);
  });
});
