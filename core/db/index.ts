export { sql, ident, raw, join, quoteIdent, quoteLiteral, SqlFragment } from './sql.js';
export { Db, Isolation, RoundTripCounter, type Queryable, type PoolLike, type TxOptions } from './port.js';
export { createPool, type DbDriver, type PoolOptions } from './pools.js';
