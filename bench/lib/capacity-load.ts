/**
 * The capacity run's load generator, a child process of the bench (bench/capacity.ts), so its CPU
 * is measured apart from the gateway's and the database's. It simulates users × devices against
 * the local gateway with raw protocol calls over HTTP (the real handlers, the real wire), the same
 * requests in the same order as the real client makes them (client-web/push.ts, pull.ts,
 * committed-rows.ts, rebuild.ts), without a SQLite database per device: a device keeps only its
 * checkpoint, its next source bundle id and the versions of the rows it wrote. The real client on
 * wa-sqlite would spend several milliseconds of CPU per sync on this same 2-core machine (bench
 * README: ~25 ms of client work per 1,000 pulled rows), so a few hundred simulated devices would
 * load the machine more than the server does; the server cannot tell the difference.
 *
 * What a device does (docs/capacity.md, "The workload"):
 * - a local write every 3–7 s (uniform); writes made while a sync is in flight go in the next
 *   bundle, as the real client's loop does; 40% insert a new row, 60% update one of its own;
 * - a sync is: push-session create, one chunk, commit, the replay of its own bundle
 *   (committed-bundles rows), then a pull to the stable ceiling;
 * - every online device holds a WebSocket (`/sync/ws`) and pulls when told of a commit;
 * - at each level 10% of the users have a device that is offline from the level's start: it keeps
 *   writing locally and comes back at a random moment (20–80% into the level), pushes what it
 *   wrote and catches up on its other device's bundles;
 * - occasional hydration: new devices (1 per 100 devices per minute) connect, take a snapshot
 *   session, download its pages and delete it.
 *
 * Messages (parent → child): `init`, `level`, `stop`; (child → parent): `ready`, `measureStart`,
 * `levelDone`, `stopped`. Timings are recorded for requests started inside the measured window.
 */
import { Agent, request as httpRequest } from 'node:http';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { SignJWT } from 'jose';
import WebSocket from 'ws';
import { insertRows, makeNotes, requestHash, type Note, type PushRow } from './rows.js';
import { percentile } from './stats.js';
import { seededRandom } from '../../test/support/fault-proxy.js';

export interface LoadConfig {
  readonly url: string;
  readonly secret: string;
  readonly devicesPerUser: number;
  readonly seedRows: number;
  readonly writeMinMs: number;
  readonly writeMaxMs: number;
  readonly offlineShare: number;
  readonly hydrationsPerDevicePerMinute: number;
  readonly seed: number;
}

export interface RouteStats {
  readonly count: number;
  readonly p50: number;
  readonly p99: number;
  readonly max: number;
}

export interface LevelStats {
  readonly users: number;
  readonly devices: number;
  readonly windowMs: number;
  readonly requests: number;
  readonly routes: Record<string, RouteStats>;
  readonly errors: number;
  readonly errorSamples: string[];
  readonly bundles: number;
  readonly rowsPushed: number;
  readonly hydrations: number;
  readonly catchUps: number;
  readonly generatorCpuMs: number;
  readonly eventLoopDelayP99Ms: number;
  readonly setupMs: number;
}

export type ToChild =
  | { readonly type: 'init'; readonly config: LoadConfig }
  | { readonly type: 'level'; readonly users: number; readonly warmupMs: number; readonly measureMs: number }
  | { readonly type: 'stop' };

export type FromChild =
  | { readonly type: 'ready' }
  | { readonly type: 'measureStart'; readonly setupMs: number }
  | { readonly type: 'levelDone'; readonly stats: LevelStats }
  /** Rows inserted by commits the generator saw answered, and by commits still unanswered when it stopped. */
  | { readonly type: 'stopped'; readonly insertedRows: number; readonly insertedRowsInFlight: number }
  | { readonly type: 'failed'; readonly message: string };

class HttpError extends Error {
  constructor(
    readonly route: string,
    readonly status: number,
    body: string,
  ) {
    super(`${route} answered ${status}: ${body.slice(0, 200)}`);
  }
}

/** Everything the generator measures, reset at each level's window. */
class Meter {
  windowStart = Infinity;
  windowEnd = Infinity;
  latencies = new Map<string, number[]>();
  errors = 0;
  errorSamples: string[] = [];
  bundles = 0;
  rowsPushed = 0;
  hydrations = 0;
  catchUps = 0;

  inWindow(startedAt: number): boolean {
    return startedAt >= this.windowStart && startedAt < this.windowEnd;
  }

  record(route: string, startedAt: number, ms: number): void {
    if (!this.inWindow(startedAt)) return;
    const list = this.latencies.get(route) ?? [];
    list.push(ms);
    this.latencies.set(route, list);
  }

  /** Errors count whenever they happen (setup included): any failure ends the ramp. */
  error(message: string): void {
    this.errors++;
    if (this.errorSamples.length < 5) this.errorSamples.push(message);
  }

  reset(start: number, end: number): void {
    this.windowStart = start;
    this.windowEnd = end;
    this.latencies = new Map();
    this.bundles = 0;
    this.rowsPushed = 0;
    this.hydrations = 0;
    this.catchUps = 0;
  }
}

class Load {
  readonly agent = new Agent({ keepAlive: true, maxSockets: 512 });
  readonly base: URL;
  readonly rand: () => number;
  readonly meter = new Meter();
  readonly users: User[] = [];
  stopped = false;
  /** New keys in commits answered `committed` (setup's seed rows included). */
  insertedRows = 0;
  /** New keys in commits sent and not answered yet. */
  insertedRowsInFlight = 0;
  private hydrationTimer: NodeJS.Timeout | undefined;
  private hydrationCredit = 0;
  private hydrationCount = 0;

  constructor(readonly config: LoadConfig) {
    this.base = new URL(config.url);
    // Seeded, so two runs make the same choices.
    this.rand = seededRandom(config.seed);
  }

  /** One HTTP request; any status but `expect` throws. Timed per route. */
  call<T>(route: string, token: string, source: string, method: string, path: string, body?: unknown, expect = 200): Promise<T> {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const startedAt = performance.now();
    return new Promise<T>((resolve, reject) => {
      const req = httpRequest(
        {
          agent: this.agent,
          host: this.base.hostname,
          port: this.base.port,
          method,
          path,
          headers: {
            authorization: `Bearer ${token}`,
            'sync-source-id': source,
            // The edge compresses large bodies for clients that ask; devices here read plain JSON.
            'accept-encoding': 'identity',
            ...(payload !== undefined ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } : {}),
          },
          timeout: 60_000,
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            const ms = performance.now() - startedAt;
            const text = Buffer.concat(chunks).toString('utf8');
            this.meter.record(route, startedAt, ms);
            if (res.statusCode !== expect) return reject(new HttpError(route, res.statusCode ?? 0, text));
            try {
              resolve((text ? JSON.parse(text) : undefined) as T);
            } catch (error) {
              reject(error instanceof Error ? error : new Error(String(error)));
            }
          });
          res.on('error', reject);
        },
      );
      req.on('timeout', () => req.destroy(new Error(`${route} timed out`)));
      req.on('error', reject);
      if (payload !== undefined) req.write(payload);
      req.end();
    });
  }

  async addUsers(total: number): Promise<void> {
    const fresh: User[] = [];
    for (let u = this.users.length; u < total; u++) fresh.push(new User(this, `cap-u${u}`));
    this.users.push(...fresh);
    let next = 0;
    // A few at a time: setup is not measured, but it should not swamp the devices already running.
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (next < fresh.length) await (fresh[next++] as User).setUp();
      }),
    );
  }

  /** At each level a new tenth of the users has a device offline from now, back 20–80% into the level. */
  takeDevicesOffline(levelMs: number): void {
    for (const user of this.users) {
      if (this.rand() >= this.config.offlineShare) continue;
      const device = user.devices[user.devices.length - 1] as Device;
      device.goOffline(levelMs * (0.2 + 0.6 * this.rand()));
    }
  }

  /** Hydrations arrive at a steady rate (1 per 100 devices per minute unless configured). */
  startHydrations(): void {
    this.hydrationTimer ??= setInterval(() => {
      const devices = this.users.length * this.config.devicesPerUser;
      this.hydrationCredit += (devices * this.config.hydrationsPerDevicePerMinute) / 60;
      while (this.hydrationCredit >= 1 && !this.stopped) {
        this.hydrationCredit -= 1;
        // Only users whose setup finished (a user being set up has no token yet).
        const user = this.users[Math.floor(this.rand() * this.users.length)];
        if (user?.ready) void this.hydrate(user);
      }
    }, 1000);
  }

  private async hydrate(user: User): Promise<void> {
    const source = `${user.id}-h${this.hydrationCount++}`;
    const started = performance.now();
    try {
      const connect = await this.call<{ resolution: string }>('connect', user.token, source, 'POST', '/sync/connect', { has_local_pending_rows: false });
      if (connect.resolution !== 'remote_authoritative') throw new Error(`hydration connect answered ${connect.resolution}`);
      const session = await this.call<{ snapshot_id: string; row_count: number }>('snapshot-create', user.token, source, 'POST', '/sync/snapshot-sessions', {});
      let after = 0;
      for (;;) {
        const page = await this.call<{ rows: unknown[]; next_row_ordinal: number; has_more: boolean }>(
          'snapshot-page', user.token, source, 'GET', `/sync/snapshot-sessions/${session.snapshot_id}?after_row_ordinal=${after}&max_rows=5000`);
        after = page.next_row_ordinal;
        if (!page.has_more) break;
      }
      if (after !== session.row_count) throw new Error(`hydration read ${after} of ${session.row_count} rows`);
      await this.call('snapshot-delete', user.token, source, 'DELETE', `/sync/snapshot-sessions/${session.snapshot_id}`, undefined, 204);
      if (this.meter.inWindow(started)) this.meter.hydrations++;
    } catch (error) {
      this.meter.error(`hydration: ${error instanceof Error ? error.message : String(error)}`);
    }
  }

  stop(): void {
    this.stopped = true;
    if (this.hydrationTimer) clearInterval(this.hydrationTimer);
    for (const user of this.users) for (const device of user.devices) device.stop();
    this.agent.destroy();
  }
}

class User {
  token = '';
  /** Set up: its stream exists and its devices run. */
  ready = false;
  readonly devices: Device[] = [];

  constructor(
    readonly load: Load,
    readonly id: string,
  ) {}

  async setUp(): Promise<void> {
    const { config } = this.load;
    this.token = await new SignJWT({ sub: this.id }).setProtectedHeader({ alg: 'HS256' }).setIssuedAt().setExpirationTime('12h')
      .sign(new TextEncoder().encode(config.secret));
    for (let d = 0; d < config.devicesPerUser; d++) this.devices.push(new Device(this, d));
    const [first, ...others] = this.devices as [Device, ...Device[]];
    try {
      // The first device starts the stream with its seed rows; the others attach to it (their
      // own rows come from their own writes, so they never need the seed rows' versions).
      await first.connect('initialize_empty');
      const seq = await first.pushSeed(makeNotes(config.seedRows, 0));
      for (const d of others) {
        await d.connect('remote_authoritative');
        d.checkpoint = seq;
      }
      for (const d of this.devices) d.start();
      this.ready = true;
    } catch (error) {
      this.load.meter.error(`setup of ${this.id}: ${error instanceof Error ? error.message : String(error)}`);
    }
  }
}

type PendingOp = 'insert' | 'update';

class Device {
  readonly source: string;
  checkpoint = 0;
  private nextSourceBundleId = 1;
  /** The rows this device wrote, with their values and versions. */
  private readonly own = new Map<string, { note: Note; version: number }>();
  private readonly ownIds: string[] = [];
  private pending = new Map<string, PendingOp>();
  private busy = false;
  private pullWanted = false;
  private online = true;
  private broken = false;
  private timer: NodeJS.Timeout | undefined;
  private comeback: NodeJS.Timeout | undefined;
  private socket: WebSocket | undefined;
  private writes = 0;

  constructor(
    readonly user: User,
    readonly index: number,
  ) {
    this.source = `${user.id}-d${index}`;
  }

  private get load(): Load {
    return this.user.load;
  }

  private call<T>(route: string, method: string, path: string, body?: unknown, expect = 200): Promise<T> {
    return this.load.call<T>(route, this.user.token, this.source, method, path, body, expect);
  }

  async connect(expected: string): Promise<void> {
    const answer = await this.call<{ resolution: string }>('connect', 'POST', '/sync/connect', { has_local_pending_rows: false });
    if (answer.resolution !== expected) throw new Error(`connect answered ${answer.resolution}, expected ${expected}`);
  }

  async pushSeed(notes: readonly Note[]): Promise<number> {
    const seq = await this.push(insertRows(notes), notes);
    this.checkpoint = seq;
    return seq;
  }

  start(): void {
    this.openSocket();
    // Devices start out of step, so writes are spread over the interval from the first second.
    this.schedule(this.load.rand() * this.load.config.writeMaxMs);
  }

  stop(): void {
    this.broken = true;
    clearTimeout(this.timer);
    clearTimeout(this.comeback);
    this.socket?.terminate();
  }

  goOffline(forMs: number): void {
    if (this.broken || !this.online) return;
    this.online = false;
    this.socket?.terminate();
    this.socket = undefined;
    this.comeback = setTimeout(() => {
      this.online = true;
      this.load.meter.catchUps += this.load.meter.inWindow(performance.now()) ? 1 : 0;
      this.openSocket();
      // What a device that was offline does first: push its offline writes, then catch up.
      this.pullWanted = true;
      this.kick();
    }, forMs);
  }

  private openSocket(): void {
    const { base } = this.load;
    const url = `ws://${base.host}/sync/ws?token=${encodeURIComponent(this.user.token)}&source_id=${encodeURIComponent(this.source)}`;
    const socket = new WebSocket(url);
    this.socket = socket;
    socket.on('message', (data) => {
      const message = JSON.parse(String(data)) as { type: string; latest_bundle_seq: number };
      if (message.type === 'changed' && message.latest_bundle_seq > this.checkpoint) {
        this.pullWanted = true;
        this.kick();
      }
    });
    socket.on('error', (error) => {
      if (!this.broken && this.socket === socket) this.load.meter.error(`websocket of ${this.source}: ${error.message}`);
    });
  }

  private schedule(delayMs: number): void {
    this.timer = setTimeout(() => {
      if (this.broken || this.load.stopped) return;
      this.localWrite();
      const { writeMinMs, writeMaxMs } = this.load.config;
      this.schedule(writeMinMs + this.load.rand() * (writeMaxMs - writeMinMs));
    }, delayMs);
  }

  /** A write into the local database: captured as pending until the next sync takes it. */
  private localWrite(): void {
    // An offline device keeps at most a few hundred pending rows (a bounded test).
    if (this.pending.size >= 200) return;
    const update = this.ownIds.length > 0 && this.load.rand() < 0.6;
    if (update) {
      const id = this.ownIds[Math.floor(this.load.rand() * this.ownIds.length)] as string;
      if (!this.pending.has(id)) this.pending.set(id, 'update');
    } else {
      const [note] = makeNotes(1, this.writes) as [Note];
      this.own.set(note.id, { note, version: 0 });
      this.ownIds.push(note.id);
      this.pending.set(note.id, 'insert');
    }
    this.writes++;
    this.kick();
  }

  private kick(): void {
    if (this.busy || !this.online || this.broken || this.load.stopped) return;
    let work: (() => Promise<void>) | undefined;
    if (this.pending.size > 0) work = () => this.sync();
    else if (this.pullWanted) {
      this.pullWanted = false;
      work = () => this.pullToStable();
    }
    if (!work) return;
    this.busy = true;
    work().then(
      () => {
        this.busy = false;
        this.kick();
      },
      (error: unknown) => {
        // A failed device stops: the ramp ends at the first error anyway, and a device that lost
        // track of its source sequence would only add noise.
        this.busy = false;
        this.broken = true;
        this.socket?.terminate();
        if (!this.load.stopped) this.load.meter.error(`${this.source}: ${error instanceof Error ? error.message : String(error)}`);
      },
    );
  }

  /** Push what is pending (one bundle), replay it, pull to the stable ceiling. */
  private async sync(): Promise<void> {
    const taken = this.pending;
    this.pending = new Map();
    const notes: Note[] = [];
    const rows: PushRow[] = [];
    for (const [id, op] of taken) {
      const entry = this.own.get(id) as { note: Note; version: number };
      const note = op === 'update' ? { ...entry.note, title: `${entry.note.title.split(' · ')[0]} · edit ${this.writes}`, done: !entry.note.done } : entry.note;
      entry.note = note;
      notes.push(note);
      rows.push({ schema: 'bench', table: 'notes', key: { id }, op: entry.version === 0 ? 'INSERT' : 'UPDATE', base_row_version: entry.version, payload: note });
    }
    const seq = await this.push(rows, notes);
    await this.call('committed-rows', 'GET', `/sync/committed-bundles/${seq}/rows?after_row_ordinal=0&max_rows=1000`);
    if (seq === this.checkpoint + 1) this.checkpoint = seq;
    await this.pullToStable();
  }

  private async push(rows: readonly PushRow[], notes: readonly Note[]): Promise<number> {
    const sourceBundleId = this.nextSourceBundleId;
    const created = await this.call<{ push_id: string; status: string }>('push-create', 'POST', '/sync/push-sessions', {
      source_bundle_id: sourceBundleId,
      planned_row_count: rows.length,
      request_hash: requestHash(rows),
    });
    if (created.status !== 'staging') throw new Error(`push-session create answered ${created.status}`);
    for (let start = 0; start < rows.length; start += 1000) {
      await this.call('push-chunk', 'POST', `/sync/push-sessions/${created.push_id}/chunks`, { start_row_ordinal: start, rows: rows.slice(start, start + 1000) });
    }
    const startedAt = performance.now();
    const inserts = rows.filter((r) => r.op === 'INSERT').length;
    this.load.insertedRowsInFlight += inserts;
    // A commit that fails or is never answered may still have committed: its rows stay in flight.
    const commit = await this.call<{ status: string; bundle_seq: number; row_count: number }>('push-commit', 'POST', `/sync/push-sessions/${created.push_id}/commit`, {});
    this.load.insertedRowsInFlight -= inserts;
    if (commit.status !== 'committed' || commit.row_count !== rows.length) throw new Error(`commit answered ${commit.status} with ${commit.row_count} rows of ${rows.length}`);
    this.nextSourceBundleId++;
    this.load.insertedRows += inserts;
    for (const note of notes) {
      const entry = this.own.get(note.id);
      if (entry) entry.version = commit.bundle_seq;
      else this.own.set(note.id, { note, version: commit.bundle_seq });
      if (!entry && !this.ownIds.includes(note.id)) this.ownIds.push(note.id);
    }
    if (this.load.meter.inWindow(startedAt)) {
      this.load.meter.bundles++;
      this.load.meter.rowsPushed += rows.length;
    }
    return commit.bundle_seq;
  }

  private async pullToStable(): Promise<void> {
    let target: number | undefined;
    for (;;) {
      const page = await this.call<{ stable_bundle_seq: number; bundles: { bundle_seq: number }[]; has_more: boolean }>(
        'pull', 'GET', `/sync/pull?after_bundle_seq=${this.checkpoint}&max_bundles=100${target !== undefined ? `&target_bundle_seq=${target}` : ''}`);
      target ??= page.stable_bundle_seq;
      const last = page.bundles.at(-1)?.bundle_seq;
      if (last !== undefined) this.checkpoint = last;
      if (!page.has_more) return;
    }
  }
}

function summarize(latencies: Map<string, number[]>): Record<string, RouteStats> {
  const out: Record<string, RouteStats> = {};
  for (const [route, list] of [...latencies].sort(([a], [b]) => a.localeCompare(b))) {
    out[route] = { count: list.length, p50: percentile(list, 50), p99: percentile(list, 99), max: Math.max(...list) };
  }
  return out;
}

function send(message: FromChild): void {
  process.send?.(message);
}

/** The child's side of the conversation. */
function serve(): void {
  let load: Load | undefined;
  const delay = monitorEventLoopDelay({ resolution: 10 });
  delay.enable();
  process.on('message', (raw: ToChild) => {
    void (async () => {
      try {
        if (raw.type === 'init') {
          load = new Load(raw.config);
          send({ type: 'ready' });
        } else if (raw.type === 'level') {
          if (!load) throw new Error('level before init');
          const setupStart = performance.now();
          await load.addUsers(raw.users);
          const setupMs = performance.now() - setupStart;
          load.takeDevicesOffline(raw.warmupMs + raw.measureMs);
          load.startHydrations();
          await new Promise((r) => setTimeout(r, raw.warmupMs));
          const start = performance.now();
          load.meter.reset(start, start + raw.measureMs);
          delay.reset();
          const cpu0 = process.cpuUsage();
          send({ type: 'measureStart', setupMs });
          await new Promise((r) => setTimeout(r, raw.measureMs));
          const cpu = process.cpuUsage(cpu0);
          const m = load.meter;
          const routes = summarize(m.latencies);
          const errors = m.errors;
          const errorSamples = m.errorSamples;
          m.errors = 0;
          m.errorSamples = [];
          send({
            type: 'levelDone',
            stats: {
              users: load.users.length,
              devices: load.users.length * load.config.devicesPerUser,
              windowMs: raw.measureMs,
              requests: Object.values(routes).reduce((n, r) => n + r.count, 0),
              routes,
              errors,
              errorSamples,
              bundles: m.bundles,
              rowsPushed: m.rowsPushed,
              hydrations: m.hydrations,
              catchUps: m.catchUps,
              generatorCpuMs: (cpu.user + cpu.system) / 1000,
              eventLoopDelayP99Ms: delay.percentile(99) / 1e6,
              setupMs,
            },
          });
        } else if (raw.type === 'stop') {
          load?.stop();
          send({ type: 'stopped', insertedRows: load?.insertedRows ?? 0, insertedRowsInFlight: load?.insertedRowsInFlight ?? 0 });
          setTimeout(() => process.exit(0), 50);
        }
      } catch (error) {
        send({ type: 'failed', message: error instanceof Error ? (error.stack ?? error.message) : String(error) });
      }
    })();
  });
}

if (process.send) serve();
