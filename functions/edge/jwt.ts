/**
 * Bearer token verification where no API Gateway authorizer does it: the WebSocket API's
 * `$connect` (API Gateway WebSocket APIs have no JWT authorizer) and the local gateway's socket.
 * The same rules as the HTTP API's JWT authorizer: signature by the issuer's keys (JWKS), issuer
 * and audience when configured, `exp` required.
 */
import { createRemoteJWKSet, jwtVerify, type JWTPayload, type JWTVerifyGetKey } from 'jose';
import { type Config } from '../../core/config.js';

export type TokenVerifier = (token: string) => Promise<JWTPayload | null>;

/** The verifier the configuration describes, or null when it names no key. */
export function tokenVerifier(jwt: Config['jwt']): TokenVerifier | null {
  const jwksUrl = jwt.jwksUrl ?? (jwt.issuer ? `${jwt.issuer.replace(/\/+$/, '')}/.well-known/jwks.json` : undefined);
  const claims = { ...(jwt.issuer ? { issuer: jwt.issuer } : {}), ...(jwt.audience ? { audience: jwt.audience.split(',').map((a) => a.trim()) } : {}), requiredClaims: ['exp'] };
  let key: JWTVerifyGetKey | Uint8Array;
  let algorithms: string[] | undefined;
  if (jwksUrl) key = createRemoteJWKSet(new URL(jwksUrl));
  else if (jwt.secret) {
    key = new TextEncoder().encode(jwt.secret);
    algorithms = ['HS256'];
  } else return null;
  return async (token) => {
    try {
      const options = { ...claims, ...(algorithms ? { algorithms } : {}) };
      return (typeof key === 'function' ? await jwtVerify(token, key, options) : await jwtVerify(token, key, options)).payload;
    } catch {
      return null;
    }
  };
}
