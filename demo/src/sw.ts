/**
 * The demo's service worker: caches the app shell (html, js, wasm, manifest) at install so the
 * app starts offline; API calls (/sync, /syncx, /dev) always go to the network. The cache name
 * carries the build id, so a new build installs a new cache and the old one is deleted.
 */

// The WebWorker lib is not in this project's tsconfig; these are the few shapes used here.
interface ExtendableEvent extends Event {
  waitUntil(promise: Promise<unknown>): void;
}
interface FetchEvent extends ExtendableEvent {
  readonly request: Request;
  respondWith(response: Promise<Response>): void;
}
interface ServiceWorkerScope {
  skipWaiting(): Promise<void>;
  readonly clients: { claim(): Promise<void> };
  addEventListener(type: 'install' | 'activate', listener: (event: ExtendableEvent) => void): void;
  addEventListener(type: 'fetch', listener: (event: FetchEvent) => void): void;
}

declare const LOCKSTEP_BUILD_ID: string;

const sw = globalThis as unknown as ServiceWorkerScope;
const CACHE = `lockstep-demo-${LOCKSTEP_BUILD_ID}`;
const SHELL = ['/', '/app.js', '/worker.js', '/wa-sqlite.wasm', '/manifest.webmanifest', '/icon.svg'];
/** Marks answers served from the cache, so a test can tell them from network answers. */
const FROM_CACHE_HEADER = 'x-lockstep-sw';

sw.addEventListener('install', (event) => {
  event.waitUntil(
    caches
      .open(CACHE)
      .then((cache) => cache.addAll(SHELL))
      .then(() => sw.skipWaiting()),
  );
});

sw.addEventListener('activate', (event) => {
  event.waitUntil(
    caches
      .keys()
      .then((names) => Promise.all(names.filter((n) => n.startsWith('lockstep-demo-') && n !== CACHE).map((n) => caches.delete(n))))
      .then(() => sw.clients.claim()),
  );
});

function isApi(url: URL): boolean {
  return url.pathname.startsWith('/sync') || url.pathname.startsWith('/dev/');
}

async function fromCache(request: Request): Promise<Response | undefined> {
  const cache = await caches.open(CACHE);
  // Every navigation gets the one page; the app routes nothing by path.
  const hit = request.mode === 'navigate' ? await cache.match('/') : await cache.match(request, { ignoreSearch: true });
  if (!hit) return undefined;
  const headers = new Headers(hit.headers);
  headers.set(FROM_CACHE_HEADER, 'cache');
  return new Response(hit.body, { status: hit.status, statusText: hit.statusText, headers });
}

sw.addEventListener('fetch', (event) => {
  const url = new URL(event.request.url);
  if (event.request.method !== 'GET' || url.origin !== location.origin || isApi(url)) return;
  // Cache first: the cache is tied to this build, so it is never stale for this worker.
  event.respondWith(fromCache(event.request).then((hit) => hit ?? fetch(event.request)));
});
