/**
 * Issue 16, the client's shape, checked on its sources: one module writes durable lifecycle state
 * (client-web/state.ts), one module decides its transitions (client-web/coordinator.ts), and the
 * steps (push, pull, rebuild) never call each other.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const DIR = join(import.meta.dirname, '..', 'client-web');
const sources = readdirSync(DIR).filter((f) => f.endsWith('.ts')).map((f) => ({ file: f, text: readFileSync(join(DIR, f), 'utf8') }));
const source = (file: string) => (sources.find((s) => s.file === file) as { text: string }).text;

/** The tables of the client's lifecycle (see client-web/state.ts). */
const LIFECYCLE_TABLES = ['_sync_attachment_state', '_sync_source_state', '_sync_push_state', '_sync_rebuild_state', '_sync_quarantine', '_sync_reached_ceiling'];

/** state.ts functions that change the lifecycle: only the coordinator calls them. */
const TRANSITIONS = [
  'attachUser', 'detachUser', 'setInitializationId', 'setRebuildRequired', 'advanceCheckpoint', 'advanceCheckpointPastOwn',
  'checkpointAtSnapshot', 'recordSourceRefusal', 'recordRotationIntent', 'adoptSource', 'recordRejection', 'acknowledgeTuple',
  'recordSnapshotDownload', 'clearSnapshotDownload', 'forgetSnapshotsBefore', 'recordCeilingReached',
];

const imports = (text: string) => [...text.matchAll(/from '\.\/([a-z-]+)\.js'/g)].map((m) => m[1] as string);

describe('web client architecture', () => {
  it('only state.ts writes lifecycle tables (install.ts only creates them and their first row)', () => {
    const writers: string[] = [];
    for (const { file, text } of sources) {
      for (const table of LIFECYCLE_TABLES) {
        // install.ts creates the single rows (INSERT OR IGNORE); anything else is a transition.
        const verbs = file === 'install.ts' ? 'INSERT\\s+INTO|INSERT\\s+OR\\s+REPLACE\\s+INTO|UPDATE|DELETE\\s+FROM|REPLACE\\s+INTO' : 'INSERT(\\s+OR\\s+\\w+)?\\s+INTO|UPDATE|DELETE\\s+FROM|REPLACE\\s+INTO';
        if (new RegExp(`(${verbs})\\s+${table}\\b`, 'i').test(text)) writers.push(`${file}: ${table}`);
      }
    }
    expect(writers.filter((w) => !w.startsWith('state.ts:'))).toEqual([]);
    expect(writers.filter((w) => w.startsWith('state.ts:')).length).toBe(LIFECYCLE_TABLES.length);
  });

  it('only the coordinator calls lifecycle transitions', () => {
    const callers: string[] = [];
    for (const { file, text } of sources) {
      if (file === 'state.ts' || file === 'coordinator.ts') continue;
      for (const name of TRANSITIONS) if (new RegExp(`\\b${name}\\s*\\(`).test(text)) callers.push(`${file}: ${name}`);
    }
    expect(callers).toEqual([]);
    for (const name of TRANSITIONS) expect(source('coordinator.ts'), name).toMatch(new RegExp(`\\b${name}\\b`));
  });

  it('steps return outcomes and never call each other or the coordinator', () => {
    const steps = ['push', 'pull', 'rebuild', 'conflicts', 'quarantine'];
    const conductors = ['coordinator', 'client', 'loop', 'machine'];
    for (const step of steps) {
      const imported = imports(source(`${step}.ts`));
      expect(imported.filter((i) => i !== step && (steps.includes(i) || conductors.includes(i))), `${step}.ts imports`).toEqual([]);
    }
    expect(imports(source('pull.ts'))).not.toContain('push');
  });

  it('the state machine is pure: it imports nothing', () => {
    expect(imports(source('machine.ts'))).toEqual([]);
    expect(source('machine.ts')).not.toMatch(/\bimport\b/);
  });
});
