/**
 * infra/template.yaml as a deploy sees it (issue 25): transformed by the AWS SAM translator (the
 * one cfn-lint depends on) with the parameters of a deploy, its conditions and intrinsics
 * evaluated (test/support/sam.ts). Each claim infra/README.md makes about what a deploy creates
 * is checked here on that result, not on the template's text.
 */
import { readFileSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import { PROPERTY_ENV } from '../functions/bootstrap.js';
import { deploy, REQUIRED_PARAMETERS, samTranslatorAvailable, TEMPLATE, transformAll, type Deployed } from './support/sam.js';
import { missing } from './support/prerequisites.js';

const skip = missing('cfn-lint') || !samTranslatorAvailable();

const withRequired = (parameters: Record<string, string>) => ({ ...REQUIRED_PARAMETERS, ...parameters });

function stack(parameters: Record<string, string> = {}): Deployed {
  return deploy(withRequired(parameters));
}

/** Deploys with a base, and with the base and one parameter changed, for every parameter. */
const SETTINGS_BASE = { DatabaseUrl: 'postgres://u:p@pooler.example/app' };

/** Another value a deploy could give `name`, within what the template allows. */
function otherValue(name: string, spec: Record<string, any>, current: string): string {
  if (Array.isArray(spec['AllowedValues'])) return String(spec['AllowedValues'].find((v: unknown) => String(v) !== current));
  if (spec['Type'] === 'Number') return String(Number(current || 0) + 1);
  if (spec['Type'] === 'CommaDelimitedList') return `${current},other`;
  if (name === 'DatabaseSecretArn') return 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:other';
  return `${current}other`;
}

/** The template's parameters (names, types, defaults, allowed values), from its transform. */
let parameters: Record<string, any> = {};

function settingsVariants(): Array<[string, Record<string, string>]> {
  return Object.entries<any>(parameters).map(([name, spec]) => {
    const current = (SETTINGS_BASE as Record<string, string>)[name] ?? REQUIRED_PARAMETERS[name] ?? String(spec.Default ?? '');
    return [name, { ...SETTINGS_BASE, [name]: otherValue(name, spec, current) }];
  });
}

const SECRET = 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:rds!db-1';
const KEY = 'arn:aws:kms:eu-west-1:123456789012:key/1234';
const VPC = { SubnetIds: 'subnet-a,subnet-b', SecurityGroupIds: 'sg-1' };
const DEPLOYS: Array<Record<string, string>> = [
  {},
  { DatabaseSecretArn: SECRET, DatabaseHost: 'proxy.proxy-abc.eu-west-1.rds.amazonaws.com', DatabaseSecretKmsKeyArn: KEY },
  { DatabaseSecretArn: SECRET },
  { DatabaseUrl: 'postgres://u:p@h/d' },
  SETTINGS_BASE,
  VPC,
  { ...VPC, VpcEgress: 'nat' },
  { PullReservedConcurrency: '50', WsReservedConcurrency: '20' },
  { ApiGatewayLogRole: 'existing' },
];

function ofType(d: Deployed, type: string): Array<[string, Record<string, any>]> {
  return Object.entries(d.resources).filter(([, r]) => r.Type === type).map(([id, r]) => [id, r.Properties]);
}

describe.skipIf(skip)('the template as deployed', () => {
  beforeAll(async () => {
    await transformAll(DEPLOYS.map(withRequired));
    parameters = stack(SETTINGS_BASE).raw['Parameters'];
    await transformAll(settingsVariants().map(([, p]) => withRequired(p)));
  }, 120_000);

  it('answers WebSocket pings on the socket, and alarms on notification failures (issue 25 item 4)', () => {
    const d = stack();
    const route = d.resources['WebSocketDefaultRoute']?.Properties;
    expect(route).toMatchObject({ RouteKey: '$default', RouteResponseSelectionExpression: '$default' });
    expect(ofType(d, 'AWS::ApiGatewayV2::RouteResponse').map(([, p]) => p)).toEqual([
      { ApiId: '<WebSocketApi>', RouteId: '<WebSocketDefaultRoute>', RouteResponseKey: '$default' },
    ]);
    const alarm = d.resources['NotificationFailuresAlarm']?.Properties;
    // Powertools publishes every metric with dimension service = POWERTOOLS_SERVICE_NAME.
    expect(d.resources['PushFunction']?.Properties['Environment'].Variables.POWERTOOLS_SERVICE_NAME).toBe('lockstep');
    expect(alarm).toMatchObject({ Namespace: 'Lockstep', MetricName: 'NotificationFailures', Dimensions: [{ Name: 'service', Value: 'lockstep' }] });
  });

  it('reads an RDS-managed secret at DatabaseHost with TLS, and may decrypt it with the given KMS key only (issue 25 item 5)', () => {
    const secretArn = SECRET;
    const keyArn = KEY;
    const d = stack({ DatabaseSecretArn: secretArn, DatabaseHost: 'proxy.proxy-abc.eu-west-1.rds.amazonaws.com', DatabaseSecretKmsKeyArn: keyArn });
    // The functions' roles (API Gateway's logging role has nothing to do with the secret).
    const roles = ofType(d, 'AWS::IAM::Role').filter(([, r]) => JSON.stringify(r['AssumeRolePolicyDocument']).includes('lambda.amazonaws.com'));
    expect(roles.map(([id]) => id).sort()).toEqual(['BootstrapFunctionRole', 'FunctionRole', 'PushFunctionRole']);
    for (const [id, role] of roles) {
      const statements = (role['Policies'] as any[]).flatMap((p) => p.PolicyDocument.Statement);
      expect(statements, id).toContainEqual({ Effect: 'Allow', Action: 'secretsmanager:GetSecretValue', Resource: secretArn });
      expect(statements, id).toContainEqual({ Effect: 'Allow', Action: 'kms:Decrypt', Resource: keyArn, Condition: { StringEquals: { 'kms:ViaService': 'secretsmanager.eu-west-1.amazonaws.com' } } });
    }
    for (const [id, fn] of ofType(d, 'AWS::Lambda::Function')) {
      expect(fn['Environment'].Variables, id).toMatchObject({ DATABASE_SECRET_ID: secretArn, DATABASE_HOST: 'proxy.proxy-abc.eu-west-1.rds.amazonaws.com', DATABASE_SSLMODE: 'verify-full', DATABASE_URL: '' });
    }
    expect(d.resources['DatabaseSecretReadAlarm']?.Properties).toMatchObject({ MetricName: 'DatabaseSecretReadFailures', Dimensions: [{ Name: 'service', Value: 'lockstep' }] });

    // The default key needs no grant; without a secret there is nothing to read or decrypt.
    for (const params of [{ DatabaseSecretArn: secretArn }, { DatabaseUrl: 'postgres://u:p@h/d' }]) {
      const plain = stack(params);
      for (const [id, role] of ofType(plain, 'AWS::IAM::Role')) expect(JSON.stringify(role), id).not.toContain('kms:Decrypt');
    }
    expect(stack({ DatabaseUrl: 'postgres://u:p@h/d' }).resources['DatabaseSecretReadAlarm']).toBeUndefined();
  });

  /** Environment variables of the bootstrap function that bootstrap does not read (checked by name). */
  const NOT_READ_BY_BOOTSTRAP = ['SYNC_APP_NAME', 'SYNC_USER_ID_CLAIM', 'SYNC_DB_POOL_MAX', 'NODE_OPTIONS', 'POWERTOOLS_SERVICE_NAME', 'POWERTOOLS_METRICS_NAMESPACE', 'POWERTOOLS_LOG_LEVEL'];

  function bootstrapSides(d: Deployed): { env: Record<string, string>; properties: Record<string, unknown> } {
    return { env: d.resources['BootstrapFunction']?.Properties['Environment'].Variables, properties: d.resources['LayoutBootstrap']?.Properties ?? {} };
  }

  it('a deploy that changes any setting bootstrap reads changes what its custom resource receives, the same values its environment holds (issue 25 item 2)', () => {
    const before = bootstrapSides(stack(SETTINGS_BASE));
    // Every variable of the function's environment is either passed as a property or not read.
    for (const name of Object.keys(before.env)) expect(Object.values(PROPERTY_ENV).includes(name as never) || NOT_READ_BY_BOOTSTRAP.includes(name), name).toBe(true);
    const changedBy: Record<string, boolean> = {};
    for (const [name, variant] of settingsVariants()) {
      const after = bootstrapSides(stack(variant));
      const readChanged = Object.values(PROPERTY_ENV).some((env) => before.env[env] !== after.env[env]);
      changedBy[name] = JSON.stringify(after.properties) !== JSON.stringify(before.properties);
      if (readChanged) expect(changedBy[name], `${name} changes what bootstrap reads, but not its custom resource's properties`).toBe(true);
      // What the custom resource receives is what the environment says, property by property.
      for (const [property, env] of Object.entries(PROPERTY_ENV)) expect(String(after.properties[property]), `${name}: ${property}`).toBe(after.env[env] ?? '');
    }
    // The audit's list, each alone.
    for (const name of ['SyncMaxSchemaVersion', 'DatabaseUrl', 'DatabaseSecretArn', 'DbDriver', 'SyncTables', 'AcceptContractSteps', 'RoleTimeouts']) expect(changedBy[name], name).toBe(true);
    // The code: a new version of the function on each new build.
    expect(before.properties['BootstrapVersion']).toMatch(/^<BootstrapFunctionVersion[0-9a-f]+>$/);
    expect(before.properties['ServiceToken']).toBe('<BootstrapFunctionAliaslive>');
    // An answer that never comes fails the resource after 16 minutes, not an hour.
    expect(before.properties['ServiceTimeout']).toBe(960);
  });

  it('refuses a VPC deploy whose subnets have no route out, before anything changes; the bootstrap may read its stack\'s status (issue 25 items 3, 7)', () => {
    const vpc = VPC;
    expect(stack(vpc).ruleFailures).toEqual([expect.stringMatching(/^VpcNeedsEgress: Functions in a VPC \(SubnetIds\) need a route to the internet through a NAT gateway/)]);
    const confirmed = stack({ ...vpc, VpcEgress: 'nat' });
    expect(confirmed.ruleFailures).toEqual([]);
    expect(confirmed.conditions['UseVpc']).toBe(true);
    for (const [id, fn] of ofType(confirmed, 'AWS::Lambda::Function')) expect(fn['VpcConfig'], id).toEqual({ SubnetIds: ['subnet-a', 'subnet-b'], SecurityGroupIds: ['sg-1'] });
    expect(stack().ruleFailures).toEqual([]);
    const statements = (stack().resources['BootstrapFunctionRole']?.Properties['Policies'] as any[]).flatMap((p) => p.PolicyDocument.Statement);
    expect(statements).toContainEqual({ Effect: 'Allow', Action: 'cloudformation:DescribeStacks', Resource: expect.stringMatching(/^arn:aws:cloudformation:eu-west-1:123456789012:stack\/lockstep\//) });
  });

  it('reserves concurrency per function, only where asked, and watches only this stack\'s functions for throttles; the WebSocket API logs and alarms (issue 25 item 9)', () => {
    // Globals reserve nothing: a reservation there was one per function (eight times N).
    const text = readFileSync(TEMPLATE, 'utf8');
    expect(text.slice(text.indexOf('\nGlobals:'), text.indexOf('\nResources:'))).not.toContain('ReservedConcurrentExecutions');
    const functions = (d: Deployed) => Object.fromEntries(ofType(d, 'AWS::Lambda::Function').map(([id, p]) => [id, p['ReservedConcurrentExecutions']]));
    expect(Object.values(functions(stack())).every((r) => r === undefined)).toBe(true);
    const capped = functions(stack({ PullReservedConcurrency: '50', WsReservedConcurrency: '20' }));
    expect(Object.entries(capped).filter(([, r]) => r !== undefined)).toEqual([['PullFunction', '50'], ['WsFunction', '20']]);

    const d = stack();
    // Throttles of the stack's own eight functions, by name: not the account's (a metric without a
    // FunctionName dimension).
    const alarm = d.resources['ThrottleAlarm']?.Properties ?? {};
    expect(alarm['MetricName']).toBeUndefined();
    const stats = (alarm['Metrics'] as any[]).filter((m) => m.MetricStat);
    const names = stats.map((m) => m.MetricStat.Metric.Dimensions.map((dim: any) => `${dim.Name}=${dim.Value}`).join()).sort();
    const fnIds = ofType(d, 'AWS::Lambda::Function').map(([id]) => id);
    expect(names).toEqual(fnIds.map((id) => `FunctionName=<${id}>`).sort());
    expect(fnIds).toHaveLength(8);
    expect((alarm['Metrics'] as any[]).find((m) => m.ReturnData)?.Expression).toMatch(/^SUM\(\[/);

    // The WebSocket API writes access logs, through the account's API Gateway logging role,
    // which the stack sets unless told the account has one, and alarms on its execution errors.
    const stage = d.resources['WebSocketStage']?.Properties ?? {};
    expect(stage['AccessLogSettings'].DestinationArn).toBe('<WebSocketAccessLogGroup.Arn>');
    expect(d.resources['WebSocketAccessLogGroup']?.Properties['RetentionInDays']).toBe('30');
    expect(stage['Description']).toContain('<ApiGatewayAccount>');
    expect(d.resources['ApiGatewayAccount']?.Properties).toEqual({ CloudWatchRoleArn: '<ApiGatewayCloudWatchRole.Arn>' });
    const existing = stack({ ApiGatewayLogRole: 'existing' });
    expect(existing.resources['ApiGatewayAccount']).toBeUndefined();
    expect(existing.resources['WebSocketStage']?.Properties['AccessLogSettings']).toBeDefined();
    expect(d.resources['WebSocketErrorAlarm']?.Properties).toMatchObject({ Namespace: 'AWS/ApiGateway', MetricName: 'ExecutionError',
      Dimensions: [{ Name: 'ApiId', Value: '<WebSocketApi>' }, { Name: 'Stage', Value: '<WebSocketStage>' }] });
  });
});
