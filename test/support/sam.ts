/**
 * infra/template.yaml as CloudFormation would deploy it with given parameter values: transformed
 * by the AWS SAM translator (test/support/sam-transform.py, the translator cfn-lint depends on),
 * then its conditions and intrinsics evaluated (Ref, Fn::If, Fn::Sub, Fn::Join, …), resources
 * whose condition is false left out. So a test can ask what a deploy with these parameters
 * creates, and what a custom resource receives. A resource's physical id stands in as
 * `<LogicalId>` and an attribute as `<LogicalId.Attribute>`.
 */
import { spawn, spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { ROOT } from '../../infra/build.js';

export const TEMPLATE = join(ROOT, 'infra', 'template.yaml');
const SCRIPT = join(ROOT, 'test', 'support', 'sam-transform.py');

/**
 * Whether python3 finds the SAM translator and cfn-lint (which depends on it): the tests that need
 * it skip with cfn-lint's need (test/support/prerequisites.ts) when it does not. Found, not
 * imported: importing them takes ~1.5 s, and the transform imports them anyway.
 */
export function samTranslatorAvailable(): boolean {
  const found = 'import importlib.util as u, sys; sys.exit(0 if u.find_spec("samtranslator") and u.find_spec("cfnlint") else 1)';
  return spawnSync('python3', ['-c', found], { stdio: 'ignore' }).status === 0;
}

export interface Resource {
  readonly Type: string;
  readonly Properties: Record<string, any>;
  readonly DependsOn?: string | string[];
}

export interface Deployed {
  /** The resources a deploy creates, their properties evaluated. */
  readonly resources: Record<string, Resource>;
  readonly conditions: Readonly<Record<string, boolean>>;
  /** Template-level rules that fail for these parameters (CloudFormation refuses the deploy). */
  readonly ruleFailures: readonly string[];
  /** The transformed template before evaluation. */
  readonly raw: Record<string, any>;
}

const PSEUDO: Record<string, string> = {
  'AWS::StackName': 'lockstep',
  'AWS::Region': 'eu-west-1',
  'AWS::AccountId': '123456789012',
  'AWS::Partition': 'aws',
  'AWS::URLSuffix': 'amazonaws.com',
  'AWS::StackId': 'arn:aws:cloudformation:eu-west-1:123456789012:stack/lockstep/00000000-0000-0000-0000-000000000000',
};
const NO_VALUE = Symbol('AWS::NoValue');

/** A value as Fn::Equals compares it: numbers and booleans as their text. */
const scalar = (v: unknown): string => (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean' ? `s:${String(v)}` : JSON.stringify(v));

const transformed = new Map<string, Record<string, any>>();

/**
 * Transforms the template once per parameter set, in one python process (importing the
 * translator takes seconds, a transform a tenth of one), without blocking the test's thread.
 * Results are cached; `deploy` reads them.
 */
export async function transformAll(sets: ReadonlyArray<Record<string, string>>, template = TEMPLATE): Promise<void> {
  const missing = sets.filter((p) => !transformed.has(JSON.stringify([template, p])));
  if (missing.length === 0) return;
  const child = spawn('python3', [SCRIPT, template], { stdio: ['pipe', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (c: string) => (stdout += c));
  child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
  child.stdin.end(JSON.stringify(missing));
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  if (code !== 0) throw new Error(`the SAM transform failed: ${stderr}`);
  const results = JSON.parse(stdout) as Record<string, any>[];
  missing.forEach((p, i) => transformed.set(JSON.stringify([template, p]), results[i] as Record<string, any>));
}

function transform(parameters: Record<string, string>, template: string): Record<string, any> {
  const out = transformed.get(JSON.stringify([template, parameters]));
  if (!out) throw new Error('transformAll() these parameters first');
  return out;
}

/** Deploys (on paper) the template with `parameters` over its defaults (transformAll them first). */
export function deploy(parameters: Record<string, string>, template = TEMPLATE): Deployed {
  const raw = transform(parameters, template);
  const values: Record<string, unknown> = {};
  for (const [name, spec] of Object.entries<any>(raw['Parameters'] ?? {})) {
    const value = parameters[name] ?? (spec.Default === undefined ? undefined : String(spec.Default));
    if (value === undefined) throw new Error(`parameter ${name} has no value and no default`);
    values[name] = spec.Type === 'CommaDelimitedList' || String(spec.Type).startsWith('List<') ? value.split(',').map((v) => v.trim()) : value;
  }
  const conditionSpecs: Record<string, unknown> = raw['Conditions'] ?? {};
  const conditions: Record<string, boolean> = {};
  const condition = (name: string): boolean => {
    if (!(name in conditions)) {
      if (!(name in conditionSpecs)) throw new Error(`no condition ${name}`);
      conditions[name] = Boolean(evaluate(conditionSpecs[name]));
    }
    return conditions[name] as boolean;
  };
  const ref = (name: string): unknown => {
    if (name === 'AWS::NoValue') return NO_VALUE;
    if (name in PSEUDO) return PSEUDO[name];
    if (name in values) return values[name];
    if (name in (raw['Resources'] ?? {})) return `<${name}>`;
    throw new Error(`Ref to unknown ${name}`);
  };
  const sub = (text: string, vars: Record<string, unknown>): string =>
    text.replace(/\$\{([^}!][^}]*)\}/g, (_all, name: string) => {
      if (name in vars) return String(vars[name]);
      if (name.includes('.') && !(name in PSEUDO)) return `<${name}>`;
      const value = ref(name);
      return Array.isArray(value) ? value.join(',') : String(value);
    });
  function evaluate(value: unknown): unknown {
    if (Array.isArray(value)) return value.map(evaluate).filter((v) => v !== NO_VALUE);
    if (value === null || typeof value !== 'object') return value;
    const entries = Object.entries(value as Record<string, unknown>);
    if (entries.length === 1) {
      const [fn, arg] = entries[0] as [string, any];
      switch (fn) {
        case 'Ref': return ref(arg as string);
        case 'Condition': return condition(arg as string);
        case 'Fn::If': return condition(arg[0]) ? evaluate(arg[1]) : evaluate(arg[2]);
        // CloudFormation compares parameter values as strings: `!Equals [!Ref N, 0]` with N = "0".
        case 'Fn::Equals': return scalar(evaluate(arg[0])) === scalar(evaluate(arg[1]));
        case 'Fn::Not': return !evaluate(arg[0]);
        case 'Fn::And': return (arg as unknown[]).every((a) => evaluate(a));
        case 'Fn::Or': return (arg as unknown[]).some((a) => evaluate(a));
        case 'Fn::Contains': return (evaluate(arg[0]) as unknown[]).includes(evaluate(arg[1]));
        case 'Fn::Join': return (evaluate(arg[1]) as unknown[]).join(arg[0] as string);
        case 'Fn::Select': return (evaluate(arg[1]) as unknown[])[Number(evaluate(arg[0]))];
        case 'Fn::Split': return String(evaluate(arg[1])).split(arg[0] as string);
        case 'Fn::GetAtt': return `<${Array.isArray(arg) ? arg.join('.') : String(arg)}>`;
        case 'Fn::Sub': return typeof arg === 'string' ? sub(arg, {}) : sub(arg[0] as string, evaluate(arg[1]) as Record<string, unknown>);
        default: break;
      }
    }
    const out: Record<string, unknown> = {};
    for (const [k, v] of entries) {
      const e = evaluate(v);
      if (e !== NO_VALUE) out[k] = e;
    }
    return out;
  }
  const ruleFailures: string[] = [];
  for (const [name, rule] of Object.entries<any>(raw['Rules'] ?? {})) {
    if (rule.RuleCondition !== undefined && !evaluate(rule.RuleCondition)) continue;
    for (const assertion of rule.Assertions ?? []) if (!evaluate(assertion.Assert)) ruleFailures.push(`${name}: ${assertion.AssertDescription ?? 'assertion failed'}`);
  }
  const resources: Record<string, Resource> = {};
  for (const [id, r] of Object.entries<any>(raw['Resources'] ?? {})) {
    if (r.Condition && !condition(r.Condition as string)) continue;
    resources[id] = { Type: r.Type, Properties: (evaluate(r.Properties ?? {}) ?? {}) as Record<string, any>, ...(r.DependsOn ? { DependsOn: r.DependsOn } : {}) };
  }
  for (const name of Object.keys(conditionSpecs)) condition(name);
  return { resources, conditions, ruleFailures, raw };
}

/** Parameters every deploy must give (no defaults). */
export const REQUIRED_PARAMETERS: Readonly<Record<string, string>> = {
  JwtIssuer: 'https://issuer.example.test/',
  JwtAudience: 'lockstep',
  SyncTables: 'app.lists:id,app.items:id',
};
