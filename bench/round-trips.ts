/**
 * Round trips per request for every endpoint, from the `x-lockstep-round-trips` header of every
 * answer the run received (the other benchmarks' requests included). Endpoints the other
 * benchmarks did not touch are exercised here once each. Target: none above 2. A round trip is
 * one statement sent to PostgreSQL, not an HTTP request (the note says how many of those each
 * operation makes).
 */
import { type Benchmark } from './lib/context.js';
import { ALL_ROUTES } from './lib/http-client.js';
import { initEmpty, pushBundle } from './lib/push.js';
import { insertRows, makeNotes } from './lib/rows.js';
import { spread } from './lib/stats.js';

export const ROUND_TRIPS_MAX = 2;

export const roundTripsBenchmark: Benchmark = {
  name: 'round-trips',
  async run(ctx, rec) {
    const { server } = ctx;
    const c = server.client('rt-user');
    await c.get('/syncx/health');
    await c.get('/syncx/status');
    await c.get('/sync/capabilities');
    await initEmpty(c);
    const commit = await pushBundle(c, insertRows(makeNotes(3)), 1);
    await c.get(`/sync/committed-bundles/${commit.bundleSeq}/rows`);
    await c.get('/sync/pull?after_bundle_seq=0');
    await c.get('/sync/watch?after_bundle_seq=0&wait_seconds=1');
    const open = await c.post<{ push_id: string }>('/sync/push-sessions', { source_bundle_id: 2, planned_row_count: 1 });
    await c.del(`/sync/push-sessions/${open.body.push_id}`);
    const snap = await c.post<{ snapshot_id: string }>('/sync/snapshot-sessions', {});
    await c.get(`/sync/snapshot-sessions/${snap.body.snapshot_id}`);
    await c.del(`/sync/snapshot-sessions/${snap.body.snapshot_id}`);
    await c.get('/syncx/openapi.json');
    await server.operator().get('/syncx/operator/users/rt-user');

    const log = server.roundTrips.byRoute;
    for (const route of ALL_ROUTES) {
      const seen = log.get(route);
      rec.check(`round trips: ${route} answered with the header`, seen !== undefined && seen.length > 0, seen ? `${seen.length} requests` : 'never seen');
      if (!seen?.length) continue;
      const s = spread(seen);
      rec.figure({
        id: `round_trips.${route}`,
        label: `round trips (database statements per request): ${route}`,
        unit: 'round trips',
        value: s,
        target: { text: `≤ ${ROUND_TRIPS_MAX} (max over ${seen.length} requests)`, met: s.max <= ROUND_TRIPS_MAX },
      });
    }
    rec.note('round trips = statements a request sent to PostgreSQL (x-lockstep-round-trips; over a pooled database in Lambda they are its latency); ' +
      'HTTP requests per operation are another count: a push of n rows is 2 + ceil(n / 1,000) requests (create, chunks, commit), a pull one per page of up to 100 bundles ' +
      '(plus one per page of a bundle sent without its rows), a hydration connect + snapshot create + one per page (up to 5,000 rows or the byte budget) + delete; ' +
      'the pull and hydration figures log theirs');
    for (const [route, seen] of log) if (!ALL_ROUTES.includes(route)) rec.note(`requests outside the route table: ${route} × ${seen.length}`);
  },
};
