/** The page of the OPFS conformance fixture: `runConformance()` runs the worker's cases and answers their results. */
import type { CaseResult } from './sqlite-conformance-worker.js';

(globalThis as unknown as { runConformance: () => Promise<CaseResult[]> }).runConformance = () =>
  new Promise((resolve, reject) => {
    const worker = new Worker('/conformance-worker.js', { type: 'module' });
    worker.onmessage = (event: MessageEvent<CaseResult[]>) => resolve(event.data);
    worker.onerror = (event) => reject(new Error(`conformance worker failed: ${event.message}`));
    worker.postMessage('run');
  });
