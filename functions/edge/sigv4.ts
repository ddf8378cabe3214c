/**
 * AWS Signature Version 4 for the one AWS call the functions make: posting to the API Gateway
 * management API (`POST /{stage}/@connections/{id}`). Written here (node:crypto, ~60 lines)
 * instead of bundling the AWS SDK's client, which would add hundreds of KB to the push function
 * for one request; tested against AWS's published example signature.
 */
import { createHash, createHmac } from 'node:crypto';

export interface AwsCredentials {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  readonly sessionToken?: string | undefined;
}

export interface SignInput {
  readonly method: string;
  readonly url: URL;
  /** Header names lower-case; `host` and `x-amz-date` are added. */
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
  readonly region: string;
  readonly service: string;
  readonly credentials: AwsCredentials;
  readonly now: Date;
  /** Non-S3 services sign the path URI-encoded once more (the SDK's `uriEscapePath`). */
  readonly doubleEncodePath?: boolean;
}

const sha256Hex = (data: string): string => createHash('sha256').update(data, 'utf8').digest('hex');
const hmac = (key: Buffer | string, data: string): Buffer => createHmac('sha256', key).update(data, 'utf8').digest();

/** RFC 3986 encoding as SigV4 wants it: everything but unreserved characters. */
export function uriEncode(text: string): string {
  return encodeURIComponent(text).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

/** The headers to send: the input's plus `host`, `x-amz-date`, the session token and `authorization`. */
export function signRequest(input: SignInput): Record<string, string> {
  const amzDate = input.now.toISOString().replace(/[-:]/g, '').replace(/\.\d{3}/, '');
  const day = amzDate.slice(0, 8);
  const headers: Record<string, string> = { ...input.headers, host: input.url.host, 'x-amz-date': amzDate };
  if (input.credentials.sessionToken) headers['x-amz-security-token'] = input.credentials.sessionToken;
  const names = Object.keys(headers).map((n) => n.toLowerCase()).sort();
  const lower = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v]));
  const canonicalHeaders = names.map((n) => `${n}:${String(lower[n]).trim().replace(/\s+/g, ' ')}\n`).join('');
  const signedHeaders = names.join(';');
  const path = input.doubleEncodePath ? input.url.pathname.split('/').map(uriEncode).join('/') : input.url.pathname;
  const query = [...input.url.searchParams].map(([k, v]) => `${uriEncode(k)}=${uriEncode(v)}`).sort().join('&');
  const canonicalRequest = [input.method, path, query, canonicalHeaders, signedHeaders, sha256Hex(input.body)].join('\n');
  const scope = `${day}/${input.region}/${input.service}/aws4_request`;
  const stringToSign = ['AWS4-HMAC-SHA256', amzDate, scope, sha256Hex(canonicalRequest)].join('\n');
  const key = hmac(hmac(hmac(hmac(`AWS4${input.credentials.secretAccessKey}`, day), input.region), input.service), 'aws4_request');
  const signature = createHmac('sha256', key).update(stringToSign, 'utf8').digest('hex');
  headers['authorization'] = `AWS4-HMAC-SHA256 Credential=${input.credentials.accessKeyId}/${scope}, SignedHeaders=${signedHeaders}, Signature=${signature}`;
  return headers;
}
