// Runs under Node >= 22 with @rocicorp/zero from bench/.peers (bench/peers.ts installs both).
// Two roles, chosen by argv[2]:
//   query-server <port>          the app's query endpoint zero-cache calls (ZERO_QUERY_URL)
//   hydrate <zero-url> <rows> <n> hydrates a fresh in-memory Zero client n times, printing JSON lines
import { createServer } from 'node:http';
import { Zero, createSchema, table, string, number, boolean, defineQueries, defineQuery, createBuilder, mustGetQuery } from '@rocicorp/zero';
import { handleQueryRequest } from '@rocicorp/zero/server';

const notes = table('notes')
  .columns({ id: string(), owner: string(), title: string(), body: string(), position: number(), done: boolean(), updated_at: number() })
  .primaryKey('id');
export const schema = createSchema({ tables: [notes] });
const zql = createBuilder(schema);
const queries = defineQueries({ allNotes: defineQuery(() => zql.notes) });

async function queryServer(port) {
  const server = createServer(async (req, res) => {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const request = new Request(`http://127.0.0.1${req.url}`, { method: req.method, headers: req.headers, body: Buffer.concat(chunks) });
    try {
      const answer = await handleQueryRequest((name, args) => mustGetQuery(queries, name).fn({ args, ctx: undefined }), schema, request);
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer));
    } catch (error) {
      res.writeHead(500).end(String(error?.stack ?? error));
    }
  });
  await new Promise((r) => server.listen(port, '127.0.0.1', r));
  console.log(JSON.stringify({ ready: true, port }));
}

async function hydrate(url, rows, n) {
  for (let i = 0; i < n; i++) {
    const started = performance.now();
    const z = new Zero({ server: url, schema, userID: `peer-${process.pid}-${i}`, kvStore: 'mem', queries });
    const view = z.materialize(queries.allNotes());
    await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`Zero hydration timed out after 300 s`)), 300_000);
      view.addListener((data, resultType) => {
        if (resultType === 'complete' && data.length >= rows) {
          clearTimeout(timer);
          resolve();
        }
      });
    });
    const ms = performance.now() - started;
    console.log(JSON.stringify({ run: i, ms, rows }));
    view.destroy();
    await z.close();
  }
}

const [role, a, b, c] = process.argv.slice(2);
if (role === 'query-server') await queryServer(Number(a));
else if (role === 'hydrate') await hydrate(a, Number(b), Number(c));
else throw new Error(`unknown role ${role}`);
