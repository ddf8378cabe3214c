/**
 * Stand-ins for what CloudFormation offers a custom resource's function: the pre-signed
 * ResponseURL it answers to (which can be told to fail its first PUTs, as S3 out of reach does),
 * and the DescribeStacks API (SigV4, service `cloudformation`) whose StackStatus tells a rollback
 * from a deploy.
 */
import { createServer, type Server } from 'node:http';
import { type AddressInfo } from 'node:net';

export interface CloudFormationStandIn {
  /** The ResponseURL to give an event. */
  readonly responseUrl: string;
  /** The environment that points a function's DescribeStacks here. */
  readonly env: Record<string, string>;
  /** The stack's status DescribeStacks answers; undefined: DescribeStacks is refused (403). */
  status: string | undefined;
  /** How many of the next PUTs to the ResponseURL answer 500. */
  failPuts: number;
  /** Every answer PUT to the ResponseURL, failed ones included. */
  readonly puts: Array<{ body: any; accepted: boolean }>;
  describeCalls: number;
  close(): Promise<void>;
}

export async function cloudFormationStandIn(): Promise<CloudFormationStandIn> {
  const state = { status: 'UPDATE_IN_PROGRESS' as string | undefined, failPuts: 0, puts: [] as CloudFormationStandIn['puts'], describeCalls: 0 };
  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString('utf8')));
    req.on('end', () => {
      if (req.method === 'PUT') {
        const accepted = state.failPuts <= 0;
        if (!accepted) state.failPuts--;
        state.puts.push({ body: JSON.parse(body), accepted });
        return void res.writeHead(accepted ? 200 : 500).end();
      }
      state.describeCalls++;
      const signed = /^AWS4-HMAC-SHA256 Credential=AKIDCFN\/\d{8}\/eu-west-1\/cloudformation\/aws4_request, /.test(String(req.headers.authorization ?? ''));
      const form = new URLSearchParams(body);
      if (!signed || form.get('Action') !== 'DescribeStacks' || state.status === undefined) {
        return void res.writeHead(403, { 'content-type': 'text/xml' }).end('<ErrorResponse><Error><Code>AccessDenied</Code></Error></ErrorResponse>');
      }
      res.writeHead(200, { 'content-type': 'text/xml' }).end(
        `<DescribeStacksResponse><DescribeStacksResult><Stacks><member><StackId>${form.get('StackName')}</StackId><StackStatus>${state.status}</StackStatus></member></Stacks></DescribeStacksResult></DescribeStacksResponse>`);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const base = `http://127.0.0.1:${port}`;
  return Object.assign(state, {
    responseUrl: `${base}/response?signature=x`,
    env: { AWS_REGION: 'eu-west-1', AWS_ACCESS_KEY_ID: 'AKIDCFN', AWS_SECRET_ACCESS_KEY: 'cfn-secret', AWS_ENDPOINT_URL_CLOUDFORMATION: `${base}/` },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  }) as CloudFormationStandIn;
}
