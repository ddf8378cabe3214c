/** The page of the OPFS durability fixture: `runStep(job)` runs one step in a new worker; `write` leaves it running, `endWorker()` ends it. */
import type { DurabilityAnswer, DurabilityJob } from './opfs-durability-worker.js';

let running: Worker | undefined;

Object.assign(globalThis, {
  runStep: (job: DurabilityJob) =>
    new Promise<DurabilityAnswer>((resolve, reject) => {
      const worker = new Worker('/durability-worker.js', { type: 'module' });
      running = worker;
      worker.onmessage = (event: MessageEvent<DurabilityAnswer & { error?: string }>) => {
        if (event.data.error) reject(new Error(event.data.error));
        else resolve(event.data);
        if (job.step !== 'write') worker.terminate();
      };
      worker.onerror = (event) => reject(new Error(`durability worker failed: ${event.message}`));
      worker.postMessage(job);
    }),
  endWorker: () => running?.terminate(),
});
