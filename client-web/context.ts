/**
 * What every sync step needs: the database, the local model, the transport, the server's limits
 * and the caller's options. Built once by `openClient`; the steps (push, pull, rebuild) are plain
 * functions over it, so each stays small and testable on its own.
 */
import { type CapabilitiesResponse } from '../core/protocol/meta.js';
import { type ClientConfig, type Progress } from './api.js';
import { type LocalModel } from './local-schema.js';
import { type NotifiedPages } from './notified-pages.js';
import { type SqliteDb } from './sqlite/port.js';
import { type Transport } from './transport.js';

/** The server limits the client sizes its requests by (capabilities' `bundle_limits`). */
export interface ClientLimits {
  /**
   * Rows per uploaded chunk: the caller's `pushChunkRows`, else the most the server takes in one
   * (`max_rows_per_push_chunk`), since each chunk is a round trip and the request's byte budget
   * bounds it anyway (push.ts). Through a link adding 40 ms to each request, a 10k-row push took
   * 1.66 s in chunks of 1,000 (the server's default) and 1.28 s in chunks of 5,000; a 3,000-row
   * push 657 ms, and 457 ms sent with its create. With no latency the two are the same
   * (bench/README.md).
   */
  readonly pushChunkRows: number;
  readonly maxRowsPerBundle: number;
  readonly maxBytesPerBundle: number;
  readonly maxRequestBytes: number;
  /** The server's `max_response_bytes`, which bounds every page it answers. */
  readonly maxResponseBytes: number;
  /** Bundles per pull page: the caller's `pullBundles`, else the server's default. */
  readonly bundlesPerPull: number;
  /** The caller chose `pullBundles`: every pull page asks for that many (else pull.ts pullPageBundles sizes them). */
  readonly pullBundlesFixed: boolean;
  /** The server's `max_bundles_per_pull`. */
  readonly bundlesPerPullMax: number;
  /**
   * Rows per snapshot or committed-bundle page: the largest the server serves, since both are bulk
   * paths (a hydration; the replay of a pushed bundle, which on a 40 ms link took 2.15 s for 10k
   * rows in pages of 1,000 and 1.79 s in pages of 5,000).
   */
  readonly pageRows: number;
  /** Snapshot or pull pages asked for while one is applied (pages-ahead.ts); at least 1. */
  readonly pagesAhead: number;
  readonly watchMaxWaitSeconds: number;
  /** The server stages and commits a bundle sent with its create (`single_request_push`), and the caller allows it. */
  readonly pushInOneRequest: boolean;
  /** Snapshot rows are asked for as arrays (`snapshot_row_arrays`), unless the caller declined. */
  readonly snapshotRowArrays: boolean;
  /** A snapshot create asks for the session's first page in its answer (`snapshot_first_page`), unless the caller declined. */
  readonly snapshotFirstPage: boolean;
  /** This device's committed bundle is built from its pushed rows where the bundle hash allows, unless the caller declined. */
  readonly predictReplay: boolean;
}

export interface ClientContext {
  readonly db: SqliteDb;
  readonly model: LocalModel;
  readonly transport: Transport;
  readonly limits: ClientLimits;
  readonly config: ClientConfig;
  readonly progress: (progress: Progress) => void;
  /** The current source id, read by the transport on every request; rotation and detach move it. */
  readonly sourceRef: { current: string };
  /** Generates a new source id (rotation, detach). */
  readonly newSourceId: () => string;
  /** Pull pages that came with push notifications, for the next pull (notified-pages.ts). */
  readonly notified: NotifiedPages;
}

/**
 * Pages a hydration or a pull asks for ahead by default, and at most: three keeps a link with
 * latency busy (a 40 ms link, 100k rows hydrated: 1.73 s with one, 1.40 s with two, 1.29 s with
 * three, no better with four) for at most three pages in memory and three of the user's requests
 * at the server.
 */
const PAGES_AHEAD = 3;
const PAGES_AHEAD_MAX = 8;

function limit(caps: CapabilitiesResponse, name: string, fallback: number): number {
  const value = caps.bundle_limits[name];
  return typeof value === 'number' && Number.isFinite(value) && value > 0 ? value : fallback;
}

/** The limits the client uses: the caller's choices, capped by what the server accepts. */
export function clientLimits(caps: CapabilitiesResponse, config: ClientConfig): ClientLimits {
  const maxChunk = limit(caps, 'max_rows_per_push_chunk', 1000);
  const maxPage = limit(caps, 'max_rows_per_page', 1000);
  const maxPull = limit(caps, 'max_bundles_per_pull', 100);
  return {
    pushChunkRows: Math.min(config.pushChunkRows ?? maxChunk, maxChunk),
    maxRowsPerBundle: limit(caps, 'max_rows_per_bundle', 10_000),
    maxBytesPerBundle: limit(caps, 'max_bytes_per_bundle', 8 * 1024 * 1024),
    maxRequestBytes: limit(caps, 'max_request_bytes', 1024 * 1024),
    maxResponseBytes: limit(caps, 'max_response_bytes', 4 * 1024 * 1024),
    bundlesPerPull: Math.min(config.pullBundles ?? limit(caps, 'default_bundles_per_pull', 50), maxPull),
    pullBundlesFixed: config.pullBundles !== undefined,
    bundlesPerPullMax: maxPull,
    pageRows: Math.min(config.pageRows ?? maxPage, maxPage),
    pagesAhead: Number.isFinite(config.pagesAhead)
      ? Math.max(1, Math.min(Math.floor(config.pagesAhead as number), PAGES_AHEAD_MAX))
      : PAGES_AHEAD,
    watchMaxWaitSeconds: limit(caps, 'watch_max_wait_seconds', 25),
    pushInOneRequest: caps.features['single_request_push'] === true && config.pushInOneRequest !== false,
    snapshotRowArrays: caps.features['snapshot_row_arrays'] === true && config.snapshotRowArrays !== false,
    snapshotFirstPage: caps.features['snapshot_first_page'] === true && config.snapshotFirstPage !== false,
    predictReplay: config.predictReplay !== false,
  };
}
