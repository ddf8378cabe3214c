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
});
