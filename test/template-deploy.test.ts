/**
 * infra/template.yaml as a deploy sees it (issue 25): transformed by the AWS SAM translator (the
 * one cfn-lint depends on) with the parameters of a deploy, its conditions and intrinsics
 * evaluated (test/support/sam.ts). Each claim infra/README.md makes about what a deploy creates
 * is checked here on that result, not on the template's text.
 */
import { describe, expect, it } from 'vitest';
import { deploy, REQUIRED_PARAMETERS, samTranslatorAvailable, type Deployed } from './support/sam.js';
import { missing } from './support/prerequisites.js';

const skip = missing('cfn-lint') || !samTranslatorAvailable();

function stack(parameters: Record<string, string> = {}): Deployed {
  return deploy({ ...REQUIRED_PARAMETERS, ...parameters });
}

function ofType(d: Deployed, type: string): Array<[string, Record<string, any>]> {
  return Object.entries(d.resources).filter(([, r]) => r.Type === type).map(([id, r]) => [id, r.Properties]);
}

describe.skipIf(skip)('the template as deployed', () => {
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
    const secretArn = 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:rds!db-1';
    const keyArn = 'arn:aws:kms:eu-west-1:123456789012:key/1234';
    const d = stack({ DatabaseSecretArn: secretArn, DatabaseHost: 'proxy.proxy-abc.eu-west-1.rds.amazonaws.com', DatabaseSecretKmsKeyArn: keyArn });
    const roles = ofType(d, 'AWS::IAM::Role');
    expect(roles.length).toBeGreaterThan(0);
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
});
