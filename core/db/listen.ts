/**
 * One dedicated LISTEN connection for a long-running process (the local gateway, `npm start`).
 * LISTEN is session state, which a transaction pooler breaks (protocol §1), so this never touches
 * the request pool: it is its own `pg` client on a direct URL, and it reconnects by itself.
 */
export interface Listener {
  /** True while the LISTEN is in place; signals may be missed while it is false. */
  readonly listening: boolean;
  close(): Promise<void>;
}

export interface ListenOptions {
  readonly connectionString: string;
  readonly channel: string;
  /** More channels on the same connection (their messages name the channel). */
  readonly moreChannels?: readonly string[];
  onMessage(payload: string, channel: string): void;
  /** The connection was (re)established: anything signalled meanwhile may have been missed. */
  onReset(): void;
  /** Waits between reconnect attempts, doubling up to the maximum. */
  readonly retryMinMs?: number;
  readonly retryMaxMs?: number;
}

export async function listen(options: ListenOptions): Promise<Listener> {
  const { default: pg } = await import('pg');
  const channels = [options.channel, ...(options.moreChannels ?? [])];
  const quoted = (name: string) => `"${name.replaceAll('"', '""')}"`;
  const retryMin = options.retryMinMs ?? 100;
  const retryMax = options.retryMaxMs ?? 5000;
  let client: InstanceType<typeof pg.Client> | undefined;
  let listening = false;
  let closed = false;
  let timer: NodeJS.Timeout | undefined;
  let delay = retryMin;

  const connect = async (first: boolean): Promise<void> => {
    const c = new pg.Client({ connectionString: options.connectionString, application_name: 'lockstep-listener' });
    client = c;
    c.on('notification', (n) => {
      if (channels.includes(n.channel) && n.payload !== undefined) options.onMessage(n.payload, n.channel);
    });
    // A lost connection (restart, network) is reported here; reconnect and tell the waiters.
    c.on('error', () => lost(c));
    c.on('end', () => lost(c));
    try {
      await c.connect();
      for (const name of channels) await c.query(`LISTEN ${quoted(name)}`);
      if (closed) return void (await c.end().catch(() => undefined));
      listening = true;
      delay = retryMin;
      if (!first) options.onReset();
    } catch (error) {
      if (first) throw error;
      lost(c);
    }
  };

  const lost = (c: InstanceType<typeof pg.Client>): void => {
    if (client !== c) return;
    client = undefined;
    listening = false;
    c.end().catch(() => undefined);
    if (closed) return;
    // Waiters may have missed a signal: they re-check now, and again once the LISTEN is back.
    options.onReset();
    timer = setTimeout(() => void connect(false), delay);
    delay = Math.min(delay * 2, retryMax);
  };

  await connect(true);
  return {
    get listening() {
      return listening;
    },
    async close() {
      closed = true;
      listening = false;
      if (timer) clearTimeout(timer);
      const c = client;
      client = undefined;
      await c?.end().catch(() => undefined);
    },
  };
}
