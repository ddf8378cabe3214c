/**
 * vitest setupFiles: the tests' HTTP clients (global `fetch`) wait for a TCP connect as long as a
 * test may take. Node's fetch gives up on a connect after 10 s (undici's default), a wall-clock
 * bound: on a loaded machine (two suites and a CPU burner on two cores) a victim request to the
 * local gateway ran out of it once while the gateway was up and answering. Headers and bodies
 * keep undici's 300 s bounds; the test timeout catches anything that hangs.
 */
import { createRequire } from 'node:module';
import type * as Undici from 'undici';

const CONNECT_TIMEOUT_MS = 300_000;

// This runs before every test file: load the two modules a dispatcher needs, not undici's whole
// index (its fetch, WebSocket and caches), ~40 ms against ~120 ms a file.
const require = createRequire(import.meta.url);
const Agent = require('undici/lib/dispatcher/agent.js') as typeof Undici.Agent;
const { getGlobalDispatcher, setGlobalDispatcher } = require('undici/lib/global.js') as Pick<typeof Undici, 'getGlobalDispatcher' | 'setGlobalDispatcher'>;

// The files of a project share their process (vitest.config.ts): each gets an agent of its own,
// and the one before it is closed, so no file's requests reuse a connection another file opened
// and no idle connections pile up. close(), not destroy(): a request the last file left running
// ends on its own rather than failing in this file.
const previous = getGlobalDispatcher();
setGlobalDispatcher(new Agent({ connect: { timeout: CONNECT_TIMEOUT_MS } }));
if (previous instanceof Agent) previous.close().catch(() => undefined);
