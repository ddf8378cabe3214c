/**
 * What a user id is, for every place that accepts one (an HTTP route's JWT claim, the WebSocket
 * upgrade of the local gateway and `$connect` in AWS, the operator's path parameter): one check,
 * so no entrance accepts an id another refuses.
 */

/** Longest user id accepted (the `sub` of a JWT), in UTF-16 code units. */
export const USER_ID_MAX_CHARS = 256;

// NUL is what PostgreSQL text cannot store: matching it is the point.
// eslint-disable-next-line no-control-regex
const UNSTORABLE = /\u0000|\p{Surrogate}/u;

/**
 * Why `claim` is not a user id this service can keep apart from every other, or null when it is:
 * 1–256 characters, none that PostgreSQL text cannot hold (U+0000: the statement would fail) or
 * would fold into U+FFFD (a lone surrogate: two different claims would share one stream).
 */
export function userIdProblem(claim: unknown): string | null {
  if (typeof claim !== 'string' || claim.length === 0) return 'no user id';
  if (claim.length > USER_ID_MAX_CHARS) return `a user id is at most ${USER_ID_MAX_CHARS} characters`;
  if (UNSTORABLE.test(claim)) return 'the user id contains characters PostgreSQL cannot store (U+0000 or a lone surrogate)';
  return null;
}

/** True when `claim` is a user id this service can store and keep apart (userIdProblem). */
export function isStorableUserId(claim: unknown): claim is string {
  return userIdProblem(claim) === null;
}
