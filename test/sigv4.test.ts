/** The SigV4 signer of the management API posts, against AWS's published S3 GET example. */
import { describe, expect, it } from 'vitest';
import { signRequest, uriEncode } from '../functions/edge/sigv4.js';

describe('SigV4', () => {
  it('reproduces the signature of AWS\'s GET Object example', () => {
    const headers = signRequest({
      method: 'GET',
      url: new URL('https://examplebucket.s3.amazonaws.com/test.txt'),
      headers: { range: 'bytes=0-9', 'x-amz-content-sha256': 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855' },
      body: '',
      region: 'us-east-1',
      service: 's3',
      credentials: { accessKeyId: 'AKIAIOSFODNN7EXAMPLE', secretAccessKey: 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY' },
      now: new Date('2013-05-24T00:00:00Z'),
    });
    expect(headers['authorization']).toBe(
      'AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, ' +
        'SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41');
    expect(headers['x-amz-date']).toBe('20130524T000000Z');
  });

  it('adds the session token as a signed header and encodes connection ids as RFC 3986', () => {
    const headers = signRequest({
      method: 'POST', url: new URL('https://abc.execute-api.eu-west-1.amazonaws.com/prod/%40connections/L0SM9cOFvHcCIhw%3D'),
      headers: { 'content-type': 'application/json' }, body: '{}', region: 'eu-west-1', service: 'execute-api',
      credentials: { accessKeyId: 'AKID', secretAccessKey: 'secret', sessionToken: 'token' }, now: new Date(), doubleEncodePath: true,
    });
    expect(headers['x-amz-security-token']).toBe('token');
    expect(headers['authorization']).toContain('SignedHeaders=content-type;host;x-amz-date;x-amz-security-token');
    expect(uriEncode("a=b!'()*")).toBe('a%3Db%21%27%28%29%2A');
  });
});
