export { sql, ident, raw, join, quoteIdent, quoteLiteral, SqlFragment } from './sql.js';
export { PoolShare, ANONYMOUS_OWNER } from './fair-share.js';
export { Db, Isolation, RoundTripCounter, neverSent, type DbBounds, type Queryable, type PoolLike, type RequestScope, type TxOptions } from './port.js';
export { createPool, type DbDriver, type PoolOptions } from './pools.js';
