export { sql, ident, raw, join, quoteIdent, quoteLiteral, SqlFragment } from './sql.js';
export { Db, Isolation, PoolShare, RoundTripCounter, type DbBounds, type Queryable, type PoolLike, type RequestScope, type TxOptions } from './port.js';
export { createPool, type DbDriver, type PoolOptions } from './pools.js';
