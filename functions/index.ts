/** Every HTTP endpoint group and its routes; the local gateway and the template test use this. */
import { routes as connectRoutes } from './connect.js';
import { routes as pushRoutes } from './push.js';
import { routes as pullRoutes } from './pull.js';
import { routes as snapshotRoutes } from './snapshot.js';
import { routes as metaRoutes } from './meta.js';
import { type Route } from './edge/handler.js';

export const functionRoutes: Readonly<Record<string, readonly Route[]>> = {
  connect: connectRoutes,
  push: pushRoutes,
  pull: pullRoutes,
  snapshot: snapshotRoutes,
  meta: metaRoutes,
};

export { createHandler, type Route, type LambdaHandler } from './edge/handler.js';
export { createRuntime, runtimeFromEnv, type Runtime } from './edge/runtime.js';
export { ROUND_TRIPS_HEADER } from './edge/http.js';
export type { HttpApiEvent } from './edge/request.js';
