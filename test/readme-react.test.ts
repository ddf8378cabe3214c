/**
 * Issue 24 item 2: the README's React example compiles under tsc with the project's settings
 * (strict, exactOptionalPropertyTypes, NodeNext, react-jsx): this takes the ```tsx block under
 * "### React", points its imports at the repository and type-checks it. A README edit or an API
 * change that breaks the example fails here.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { ROOT } from './support/local-start.js';

function readmeExample(): string {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('### React'));
  const match = /```tsx\n([\s\S]*?)```/.exec(section);
  if (!match?.[1]) throw new Error('README.md: no tsx block under "### React"');
  return match[1];
}

describe('the README React example', () => {
  it('type-checks as written', () => {
    // Inside the repository (test-artifacts is not tracked), so react resolves from node_modules.
    const dir = join(ROOT, 'test-artifacts', 'readme-react');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'package.json'), '{"type": "module"}');
    const file = join(dir, 'app.tsx');
    writeFileSync(file, readmeExample().replaceAll("'./client-web/", "'../../client-web/"));
    const config = ts.getParsedCommandLineOfConfigFile(join(ROOT, 'tsconfig.json'), {}, { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => undefined });
    if (!config) throw new Error('tsconfig.json could not be read');
    const program = ts.createProgram([file], { ...config.options, noEmit: true });
    const problems = ts.getPreEmitDiagnostics(program).map((d) => {
      const where = d.file && d.start !== undefined ? `${d.file.fileName.replace(ROOT, '')}:${d.file.getLineAndCharacterOfPosition(d.start).line + 1}` : '';
      return `${where} ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`;
    });
    expect(problems).toEqual([]);
  }, 120_000);
});
