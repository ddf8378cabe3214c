/**
 * The demo's main thread: a React app on the Lockstep React bindings (client-web/react). The data
 * lives in SQLite (OPFS) inside the sync worker (worker.ts), shared by the user's tabs; the UI reads
 * it with live queries, so it shows every change the moment its transaction commits — a local
 * write, another tab's, another device's. The service worker (sw.ts) caches this shell so a reload
 * works offline too. Rendered in StrictMode: every effect mounts twice in development, and the
 * bindings must (and do) open one client for it.
 */
import { StrictMode, useEffect, useState } from 'react';
import { createRoot } from 'react-dom/client';
import { Root } from './ui/root.js';

/**
 * Over plain http to anything but localhost the browser withholds what the app needs (OPFS,
 * service workers, crypto.randomUUID): say so instead of failing on the first of them.
 */
function Insecure() {
  const local = `http://localhost:${location.port || '80'}/`;
  return (
    <section id="insecure" data-testid="insecure">
      <h2>Open this demo on localhost or over https</h2>
      <p>
        This page was opened over plain http at <strong data-testid="insecure-origin">{location.origin}</strong>, which is not a secure
        context. Browsers keep what an offline app needs (the local database in OPFS, the service worker, <code>crypto.randomUUID</code>) to
        secure contexts: <code>http://localhost</code> or <code>https://</code>.
      </p>
      <p className="muted">
        On this computer, open <a data-testid="insecure-local" href={local}>{local.replace(/\/$/, '')}</a>. From another device, serve the demo
        over https (a reverse proxy with a certificate, or a tunnel).
      </p>
    </section>
  );
}

/** Registers the service worker that caches the app shell; the badge says when it works offline. */
function useShell(): { state: string; text: string } {
  const [shell, setShell] = useState({ state: 'none', text: 'app shell not cached' });
  useEffect(() => {
    if (!('serviceWorker' in navigator)) return;
    let active = true;
    (async () => {
      await navigator.serviceWorker.register('/sw.js');
      await navigator.serviceWorker.ready;
      if (active) setShell({ state: 'cached', text: 'works offline' });
    })().catch((error: unknown) => console.warn('service worker not registered', error));
    return () => {
      active = false;
    };
  }, []);
  return shell;
}

function App() {
  const shell = useShell();
  // Counts this root's mounts on the page (test/demo.web.test.ts reads it): 2 in StrictMode's
  // development build, which mounts every effect twice.
  useEffect(() => {
    const root = document.documentElement;
    root.dataset['mounts'] = String(Number(root.dataset['mounts'] ?? 0) + 1);
  }, []);
  return isSecureContext ? <Root shell={shell} /> : <Insecure />;
}

createRoot(document.getElementById('root') as HTMLElement).render(
  <StrictMode>
    <App />
  </StrictMode>,
);
