/**
 * A stand-in for the AWS Secrets Manager API: it checks the SigV4 signature's shape and serves
 * GetSecretValue of one secret, or refuses it the way AWS does (`fail`: AccessDeniedException,
 * ThrottlingException, a KMS refusal), so the runtime's handling of each can be driven.
 */
import { createServer, type Server } from 'node:http';
import { type AddressInfo } from 'node:net';

export const SECRET_ARN = 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:lockstep-db';
export const ACCESS_KEY_ID = 'AKIDLOCKSTEPTEST';

export interface SecretsManagerStandIn {
  readonly url: string;
  secret: string;
  /** When set, every GetSecretValue is refused with this status and exception name. */
  fail: { readonly status: number; readonly type: string } | undefined;
  /** GetSecretValue calls answered with the secret. */
  reads: number;
  /** Every GetSecretValue call, refused ones included. */
  attempts: number;
  lastAuthorization: string;
  close(): Promise<void>;
}

/** The environment that points a runtime at the stand-in. */
export function secretEnv(standIn: SecretsManagerStandIn): Record<string, string> {
  return {
    DATABASE_SECRET_ID: SECRET_ARN,
    AWS_REGION: 'eu-west-1',
    AWS_ACCESS_KEY_ID: ACCESS_KEY_ID,
    AWS_SECRET_ACCESS_KEY: 'test-secret-key',
    AWS_SESSION_TOKEN: 'test-session-token',
    AWS_ENDPOINT_URL_SECRETS_MANAGER: standIn.url,
  };
}

export async function secretsManagerStandIn(initial: string): Promise<SecretsManagerStandIn> {
  const state = { secret: initial, fail: undefined as SecretsManagerStandIn['fail'], reads: 0, attempts: 0, lastAuthorization: '' };
  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString('utf8')));
    req.on('end', () => {
      state.lastAuthorization = String(req.headers.authorization ?? '');
      const signed = new RegExp(`^AWS4-HMAC-SHA256 Credential=${ACCESS_KEY_ID}/\\d{8}/eu-west-1/secretsmanager/aws4_request, SignedHeaders=[^,]+, Signature=[0-9a-f]{64}$`).test(state.lastAuthorization);
      const answer = (status: number, value: unknown): void => void res.writeHead(status, { 'content-type': 'application/x-amz-json-1.1' }).end(JSON.stringify(value));
      if (!signed || req.headers['x-amz-target'] !== 'secretsmanager.GetSecretValue') return answer(400, { __type: 'InvalidSignatureException', message: 'not signed' });
      if (JSON.parse(body).SecretId !== SECRET_ARN) return answer(400, { __type: 'ResourceNotFoundException', message: 'no such secret' });
      state.attempts++;
      if (state.fail) return answer(state.fail.status, { __type: state.fail.type, message: `refused: ${state.fail.type}` });
      state.reads++;
      answer(200, { SecretString: state.secret });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return Object.assign(state, {
    url: `http://127.0.0.1:${port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  }) as SecretsManagerStandIn;
}
