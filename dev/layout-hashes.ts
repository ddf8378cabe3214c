/** `npm run layout:hashes`: records the hashes of the managed functions (core/bootstrap/migrations/function-hashes.ts). */
import { MIGRATIONS } from '../core/bootstrap/migrations/index.js';
import { HASHES_FILE, writeHashes } from '../core/bootstrap/migrations/function-hashes.js';

try {
  writeHashes(MIGRATIONS);
  console.log(`wrote ${HASHES_FILE}`);
} catch (error) {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
}
