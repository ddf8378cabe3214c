/**
 * infra/template.yaml against the handlers: every HttpApi event is served by its function's
 * `routes` (same method, path and auth), every route of every function is in the template, and
 * the non-HTTP functions are wired as the contract says (bootstrap: no events; maintenance: a
 * schedule). cfn-lint (with the SAM translator) also checks the template: CI runs it, and a
 * machine without cfn-lint skips it by name (test/support/prerequisites.ts).
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import YAML, { type CollectionTag, type ScalarTag, type Tags } from 'yaml';
import { functionRoutes, type Route } from '../functions/index.js';
import { API_GATEWAY_TIMEOUT_MS, defaultLimits, limitProblems } from '../core/limits.js';
import { FUNCTION_NAMES, LAMBDA_NODE_OPTIONS, ROOT } from '../infra/build.js';
import { missing } from './support/prerequisites.js';

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
  Parameters: Record<string, Record<string, unknown>>;
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
  readonly auth: boolean | 'operator';
  /** The logical id of the HttpApi the event attaches to. */
  readonly api: unknown;
}

function templateRoutes(t: Template = template): TemplateRoute[] {
  const routes: TemplateRoute[] = [];
  for (const [fn, { props }] of functionsByName(t)) {
    for (const event of Object.values<any>(props['Events'] ?? {})) {
      if (event.Type !== 'HttpApi') continue;
      const p = event.Properties;
      const authorizer = p.Auth?.Authorizer;
      routes.push({ fn, method: p.Method, path: p.Path, auth: authorizer === 'AWS_IAM' ? 'operator' : authorizer !== 'NONE', api: p.ApiId?.Ref });
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

  it('protects /sync/* with the JWT authorizer by default, /syncx/operator/* with IAM, and leaves only the rest of /syncx/* open', () => {
    const api = template.Resources['SyncApi'];
    expect(api?.Type).toBe('AWS::Serverless::HttpApi');
    const auth = api?.Properties?.['Auth'];
    expect(auth.DefaultAuthorizer).toBe('LockstepJwt');
    const jwt = auth.Authorizers.LockstepJwt.JwtConfiguration;
    expect(jwt.issuer).toEqual({ Ref: 'JwtIssuer' });
    expect(jwt.audience).toEqual({ Ref: 'JwtAudience' });
    expect(auth.EnableIamAuthorizer).toBe(true);
    for (const r of templateRoutes()) expect(r.auth, `${r.method} ${r.path}`).toBe(r.path.startsWith('/syncx/operator/') ? 'operator' : r.path.startsWith('/sync/'));
  });

  it('timeouts fire in order: query < request budget < function < API Gateway (issue 17 item 3)', () => {
    const fns = functionsByName();
    expect(limitProblems(defaultLimits)).toEqual([]);
    for (const [name, { id, props }] of fns) {
      if (name === 'bootstrap' || name === 'maintenance') continue;
      const timeoutMs = Number(props['Timeout'] ?? template.Globals.Function['Timeout']) * 1000;
      // The request's budget, plus the time kept back to answer, fits in the function's timeout,
      // which API Gateway outwaits.
      expect(defaultLimits.requestTimeoutMs + defaultLimits.functionReserveMs, id).toBeLessThanOrEqual(timeoutMs);
      expect(timeoutMs, id).toBeLessThan(API_GATEWAY_TIMEOUT_MS);
      for (const event of Object.values<any>(props['Events'] ?? {})) {
        const integration = event.Properties?.TimeoutInMillis;
        if (integration !== undefined) expect(integration, id).toBeGreaterThanOrEqual(API_GATEWAY_TIMEOUT_MS);
      }
    }
  });

  it('gives watch room to wait, runs bootstrap on demand only and maintenance on a schedule', () => {
    const fns = functionsByName();
    const pullTimeout = fns.get('pull')?.props['Timeout'] ?? template.Globals.Function['Timeout'];
    expect(pullTimeout).toBeGreaterThan(defaultLimits.watchMaxWaitSeconds);
    expect(fns.get('bootstrap')?.props['Events']).toBeUndefined();
    const schedules = Object.values<any>(fns.get('maintenance')?.props['Events'] ?? {});
    // As often as limits.maintenanceIntervalSeconds, which Retry-After of a cap held by expired
    // sessions promises.
    expect(defaultLimits.maintenanceIntervalSeconds).toBe(60);
    expect(schedules.map((e) => [e.Type, e.Properties.Schedule])).toEqual([['Schedule', 'rate(1 minute)']]);
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
    expect(push?.['Role']).toEqual({ 'Fn::GetAtt': ['PushFunctionRole', 'Arn'] });
    const statements = (template.Resources['PushFunctionRole']?.Properties?.['Policies'] as any[]).flatMap((p) => p.PolicyDocument?.Statement ?? []);
    expect(statements.some((st) => st.Action === 'execute-api:ManageConnections' && JSON.stringify(st.Resource).includes('/POST/@connections/*'))).toBe(true);
    const ws = functionsByName().get('ws')?.props;
    expect(ws?.['Events']).toBeUndefined();
    expect(Object.keys(ws?.['Environment']?.Variables ?? {}).sort()).toEqual(['SYNC_JWKS_URL', 'SYNC_JWT_AUDIENCE', 'SYNC_JWT_ISSUER']);
  });

  it('reads the database secret at runtime, with least privilege: the VPC policy only with a VPC, the secret only with one (issue 17 items 4, 8)', () => {
    const text = readFileSync(TEMPLATE, 'utf8');
    // A {{resolve:secretsmanager}} is copied into the environment once and never re-read.
    expect(text).not.toContain('{{resolve:secretsmanager');
    const env = template.Globals.Function['Environment'].Variables;
    expect(env['DATABASE_SECRET_ID']).toEqual({ 'Fn::If': ['UseSecret', { Ref: 'DatabaseSecretArn' }, ''] });
    expect(env['DATABASE_URL']).toEqual({ 'Fn::If': ['UseSecret', '', { Ref: 'DatabaseUrl' }] });
    // SAM's generated roles attach AWSLambdaVPCAccessExecutionRole whenever VpcConfig is present,
    // even as an !If that resolves to nothing: every function uses the one explicit role instead.
    // (The push function's role adds posting to the WebSocket connections, the bootstrap's reading
    // its own stack's status.)
    const roles: Record<string, string> = { push: 'PushFunctionRole', bootstrap: 'BootstrapFunctionRole' };
    for (const [name, { props }] of functionsByName()) expect(props['Role'], name).toEqual({ 'Fn::GetAtt': [roles[name] ?? 'FunctionRole', 'Arn'] });
    for (const id of ['FunctionRole', 'PushFunctionRole', 'BootstrapFunctionRole']) {
      const role = template.Resources[id]?.Properties ?? {};
      const vpc = role['ManagedPolicyArns'].find((a: any) => JSON.stringify(a).includes('AWSLambdaVPCAccessExecutionRole'));
      expect(vpc['Fn::If'][0], id).toBe('UseVpc');
      const secretPolicy = role['Policies'].find((p: any) => JSON.stringify(p).includes('secretsmanager:GetSecretValue'));
      expect(secretPolicy['Fn::If'][0], id).toBe('UseSecret');
      expect(JSON.stringify(secretPolicy)).toContain('{"Ref":"DatabaseSecretArn"}');
    }
  });

  it('alarms on 5xx, throttles, maintenance failures (dead letters too) and refused database credentials; logs and throttles the API (issue 17 item 6)', () => {
    const alarms = Object.entries(template.Resources).filter(([, r]) => r.Type === 'AWS::CloudWatch::Alarm');
    expect(alarms.map(([id]) => id).sort()).toEqual(['Api5xxAlarm', 'DatabaseAuthenticationAlarm', 'MaintenanceDeadLetterAlarm', 'MaintenanceErrorAlarm', 'NotificationFailuresAlarm', 'ThrottleAlarm', 'DatabaseSecretReadAlarm', 'JwksUnavailableAlarm', 'WebSocketErrorAlarm'].sort());
    for (const [id, r] of alarms) expect(r.Properties?.['AlarmActions'], id).toEqual({ 'Fn::If': ['HasAlarmTopic', [{ Ref: 'AlarmTopicArn' }], { Ref: 'AWS::NoValue' }] });
    // Every function's log group counts the line functions/edge/database.ts writes.
    const filters = Object.values(template.Resources).filter((r) => r.Type === 'AWS::Logs::MetricFilter');
    const filtered = new Set(filters.map((f) => f.Properties?.['LogGroupName']?.Ref));
    for (const [name, { props }] of functionsByName()) expect(filtered.has(props['LoggingConfig'].LogGroup.Ref), name).toBe(true);
    for (const f of filters) expect(f.Properties?.['FilterPattern']).toBe('{ $.event = "database_authentication_failed" }');
    const maintenance = functionsByName().get('maintenance')?.props ?? {};
    expect(maintenance['DeadLetterQueue']).toEqual({ Type: 'SQS', TargetArn: { 'Fn::GetAtt': ['MaintenanceDeadLetterQueue', 'Arn'] } });
    const api = template.Resources['SyncApi']?.Properties ?? {};
    expect(api['AccessLogSettings'].DestinationArn).toEqual({ 'Fn::GetAtt': ['ApiAccessLogGroup', 'Arn'] });
    expect(api['DefaultRouteSettings']).toEqual({ ThrottlingRateLimit: { Ref: 'ThrottleRateLimit' }, ThrottlingBurstLimit: { Ref: 'ThrottleBurstLimit' } });
  });

  it('ships source maps, structured logs, metrics and optional tracing to every function (issue 17 item 6)', () => {
    const globals = template.Globals.Function;
    // The init budget of infra/build.ts is measured with the same options.
    expect(globals['Environment'].Variables['NODE_OPTIONS']).toBe(LAMBDA_NODE_OPTIONS);
    expect(globals['Environment'].Variables['POWERTOOLS_METRICS_NAMESPACE']).toBe('Lockstep');
    expect(globals['Environment'].Variables['POWERTOOLS_LOG_LEVEL']).toEqual({ Ref: 'LogLevel' });
    expect(globals['Tracing']).toEqual({ Ref: 'Tracing' });
    expect(template.Parameters['Tracing']?.['Default']).toBe('PassThrough');
    for (const [name, { props }] of functionsByName()) {
      expect(props['Environment']?.Variables?.['NODE_OPTIONS'], name).toBeUndefined();
      expect(props['Tracing'], name).toBeUndefined();
    }
    // Writing traces is granted only with tracing on.
    for (const id of ['FunctionRole', 'PushFunctionRole', 'BootstrapFunctionRole']) {
      const traces = (template.Resources[id]?.Properties?.['Policies'] as any[]).find((p) => JSON.stringify(p).includes('xray:PutTraceSegments'));
      expect(traces?.['Fn::If']?.[0], id).toBe('TraceActively');
    }
  });

  it.skipIf(missing('cfn-lint'))('passes cfn-lint (SAM transform included)', () => {
    const result = spawnSync('cfn-lint', [TEMPLATE], { encoding: 'utf8' });
    expect(result.stdout + result.stderr).toBe('');
    expect(result.status).toBe(0);
  });
});
