/**
 * infra/template.yaml against the handlers: every HttpApi event is served by its function's
 * `routes` (same method, path and auth), every route of every function is in the template, and
 * the non-HTTP functions are wired as the contract says (bootstrap: no events; maintenance: a
 * schedule). cfn-lint (with the SAM translator) also checks the template when it is installed.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import YAML, { type CollectionTag, type ScalarTag, type Tags } from 'yaml';
import { functionRoutes, type Route } from '../functions/index.js';
import { defaultLimits } from '../core/limits.js';
import { FUNCTION_NAMES, ROOT } from '../infra/build.js';

const TEMPLATE = join(ROOT, 'infra', 'template.yaml');

// CloudFormation's short-form intrinsics (!Ref, !Sub, !If, ...) as their long forms.
const INTRINSICS = ['Ref', 'Sub', 'GetAtt', 'If', 'Equals', 'Not', 'And', 'Or', 'Join', 'Select', 'Split', 'FindInMap', 'Condition', 'ImportValue', 'Base64', 'Cidr', 'GetAZs'];
const cfnTags: Tags = INTRINSICS.flatMap((name) => {
  const key = name === 'Ref' || name === 'Condition' ? name : `Fn::${name}`;
  const scalar: ScalarTag = { tag: `!${name}`, resolve: (value) => ({ [key]: name === 'GetAtt' ? value.split('.') : value }) };
  const collections = (['seq', 'map'] as const).map((collection): CollectionTag => ({ tag: `!${name}`, collection, resolve: (value) => ({ [key]: value.toJSON() }) }));
  return [scalar, ...collections];
});

interface Resource {
  Type: string;
  Properties?: Record<string, any>;
}
interface Template {
  Transform: string;
  Globals: { Function: Record<string, any> };
  Resources: Record<string, Resource>;
}

const template = YAML.parse(readFileSync(TEMPLATE, 'utf8'), { customTags: cfnTags }) as Template;

/** Function resources by the build output they ship (CodeUri ../dist/functions/<name>). */
function functionsByName(t: Template = template): Map<string, { id: string; props: Record<string, any> }> {
  const out = new Map<string, { id: string; props: Record<string, any> }>();
  for (const [id, r] of Object.entries(t.Resources)) {
    if (r.Type !== 'AWS::Serverless::Function') continue;
    const match = /^\.\.\/dist\/functions\/([a-z-]+)$/.exec(String(r.Properties?.['CodeUri']));
    expect(match, `${id}: CodeUri must be ../dist/functions/<name>`).not.toBeNull();
    out.set((match as RegExpExecArray)[1] as string, { id, props: r.Properties ?? {} });
  }
  return out;
}

interface TemplateRoute {
  readonly fn: string;
  readonly method: string;
  readonly path: string;
  readonly auth: boolean;
  /** The logical id of the HttpApi the event attaches to. */
  readonly api: unknown;
}

function templateRoutes(t: Template = template): TemplateRoute[] {
  const routes: TemplateRoute[] = [];
  for (const [fn, { props }] of functionsByName(t)) {
    for (const event of Object.values<any>(props['Events'] ?? {})) {
      if (event.Type !== 'HttpApi') continue;
      const p = event.Properties;
      routes.push({ fn, method: p.Method, path: p.Path, auth: p.Auth?.Authorizer !== 'NONE', api: p.ApiId?.Ref });
    }
  }
  return routes;
}

/**
 * Every disagreement between the template's HttpApi events and the handlers' `routes`: a
 * template route no handler serves (or served by another function), a handler route missing
 * from the template or listed twice, and auth that differs.
 */
function routeProblems(t: Template, handlers: Readonly<Record<string, readonly Route[]>>): string[] {
  const problems: string[] = [];
  const routes = templateRoutes(t);
  for (const r of routes) {
    if (r.api !== 'SyncApi') problems.push(`${r.method} ${r.path}: not on SyncApi`);
    const served = handlers[r.fn]?.find((h) => h.method === r.method && h.path === r.path);
    if (!served) problems.push(`${r.method} ${r.path}: function ${r.fn} does not serve it`);
    else if (served.auth !== r.auth) problems.push(`${r.method} ${r.path}: template auth ${r.auth}, route.auth ${served.auth}`);
  }
  for (const [fn, handlerRoutes] of Object.entries(handlers)) {
    for (const h of handlerRoutes) {
      const listed = routes.filter((r) => r.method === h.method && r.path === h.path);
      if (listed.length === 0) problems.push(`${h.method} ${h.path} (${fn}): missing from the template`);
      else if (listed.length > 1 || listed[0]?.fn !== fn) problems.push(`${h.method} ${h.path} (${fn}): in the template as ${listed.map((r) => r.fn).join(', ')}`);
    }
  }
  return problems;
}

describe('infra/template.yaml', () => {
  it('is a SAM template with one function per build output, each with index.handler on Node 20+', () => {
    expect(template.Transform).toBe('AWS::Serverless-2016-10-31');
    expect([...functionsByName().keys()].sort()).toEqual([...FUNCTION_NAMES].sort());
    const globals = template.Globals.Function;
    expect(globals['Handler']).toBe('index.handler');
    expect(globals['Runtime']).toMatch(/^nodejs(2[0-9])\.x$/);
  });

  it('routes exactly the handlers\' routes (method, path, auth) to their own functions', () => {
    expect(templateRoutes().length).toBe(Object.values(functionRoutes).flat().length);
    expect(routeProblems(template, functionRoutes)).toEqual([]);
  });

  it('notices drift: a missing route, flipped auth, a route on the wrong function, an unserved path', () => {
    const copy = (): Template => structuredClone(template);
    const events = (t: Template, id: string): Record<string, any> => t.Resources[id]?.Properties?.['Events'];

    const missing = copy();
    delete events(missing, 'PullFunction')['Watch'];
    expect(routeProblems(missing, functionRoutes)).toEqual(['GET /sync/watch (pull): missing from the template']);

    const open = copy();
    events(open, 'MetaFunction')['Capabilities'].Properties.Auth = { Authorizer: 'NONE' };
    expect(routeProblems(open, functionRoutes)).toEqual(['GET /sync/capabilities: template auth false, route.auth true']);

    const moved = copy();
    events(moved, 'ConnectFunction')['Pull'] = events(moved, 'PullFunction')['Pull'];
    delete events(moved, 'PullFunction')['Pull'];
    expect(routeProblems(moved, functionRoutes)).toEqual([
      'GET /sync/pull: function connect does not serve it',
      'GET /sync/pull (pull): in the template as connect',
    ]);

    const extra = copy();
    events(extra, 'PushFunction')['Bogus'] = { Type: 'HttpApi', Properties: { ApiId: { Ref: 'SyncApi' }, Method: 'PUT', Path: '/sync/push-sessions' } };
    expect(routeProblems(extra, functionRoutes)).toEqual(['PUT /sync/push-sessions: function push does not serve it']);
  });

  it('protects /sync/* with the JWT authorizer by default and leaves only /syncx/* open', () => {
    const api = template.Resources['SyncApi'];
    expect(api?.Type).toBe('AWS::Serverless::HttpApi');
    const auth = api?.Properties?.['Auth'];
    expect(auth.DefaultAuthorizer).toBe('LockstepJwt');
    const jwt = auth.Authorizers.LockstepJwt.JwtConfiguration;
    expect(jwt.issuer).toEqual({ Ref: 'JwtIssuer' });
    expect(jwt.audience).toEqual({ Ref: 'JwtAudience' });
    for (const r of templateRoutes()) expect(r.auth, `${r.method} ${r.path}`).toBe(r.path.startsWith('/sync/'));
  });

  it('gives watch room to wait, runs bootstrap on demand only and maintenance on a schedule', () => {
    const fns = functionsByName();
    const pullTimeout = fns.get('pull')?.props['Timeout'];
    expect(pullTimeout).toBeGreaterThan(defaultLimits.watchMaxWaitSeconds);
    expect(fns.get('bootstrap')?.props['Events']).toBeUndefined();
    const schedules = Object.values<any>(fns.get('maintenance')?.props['Events'] ?? {});
    expect(schedules.map((e) => [e.Type, e.Properties.Schedule])).toEqual([['Schedule', 'rate(5 minutes)']]);
  });

  it('keeps the database URL secret and every function logging to a group with retention', () => {
    const params = (YAML.parse(readFileSync(TEMPLATE, 'utf8'), { customTags: cfnTags }) as { Parameters: Record<string, any> }).Parameters;
    expect(params['DatabaseUrl']?.NoEcho).toBe(true);
    for (const [name, { id, props }] of functionsByName()) {
      const group = props['LoggingConfig']?.LogGroup?.Ref as string | undefined;
      expect(group, `${id} has no LoggingConfig.LogGroup`).toBeDefined();
      const resource = template.Resources[group as string];
      expect(resource?.Type, `${name}`).toBe('AWS::Logs::LogGroup');
      expect(resource?.Properties?.['RetentionInDays']).toBeDefined();
    }
  });

  it('serves push notifications: a WebSocket API whose routes go to the ws function, and the push function may post to its connections', () => {
    const api = template.Resources['WebSocketApi'];
    expect(api?.Properties?.['ProtocolType']).toBe('WEBSOCKET');
    const integration = template.Resources['WebSocketIntegration']?.Properties;
    expect(JSON.stringify(integration?.['IntegrationUri'])).toContain('${WsFunction.Arn}');
    const routeKeys = Object.values(template.Resources)
      .filter((r) => r.Type === 'AWS::ApiGatewayV2::Route')
      .map((r) => [r.Properties?.['RouteKey'], r.Properties?.['Target']]);
    expect(routeKeys.map(([k]) => k).sort()).toEqual(['$connect', '$default', '$disconnect']);
    for (const [, target] of routeKeys) expect(target).toEqual({ 'Fn::Sub': 'integrations/${WebSocketIntegration}' });
    const push = functionsByName().get('push')?.props;
    expect(JSON.stringify(push?.['Environment']?.Variables?.SYNC_WS_ENDPOINT)).toContain('${WebSocketApi}');
    const statements = (push?.['Policies'] as any[]).flatMap((p) => p.Statement ?? []);
    expect(statements.some((st) => st.Action === 'execute-api:ManageConnections' && JSON.stringify(st.Resource).includes('/POST/@connections/*'))).toBe(true);
    const ws = functionsByName().get('ws')?.props;
    expect(ws?.['Events']).toBeUndefined();
    expect(Object.keys(ws?.['Environment']?.Variables ?? {}).sort()).toEqual(['SYNC_JWKS_URL', 'SYNC_JWT_AUDIENCE', 'SYNC_JWT_ISSUER']);
  });

  const cfnLint = spawnSync('cfn-lint', ['--version'], { encoding: 'utf8' });
  it.skipIf(cfnLint.status !== 0)('passes cfn-lint (SAM transform included)', () => {
    const result = spawnSync('cfn-lint', [TEMPLATE], { encoding: 'utf8' });
    expect(result.stdout + result.stderr).toBe('');
    expect(result.status).toBe(0);
  });
});
