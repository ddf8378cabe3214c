/**
 * The API as an OpenAPI 3.1 document, generated from the operation table (operations.ts) and the
 * zod wire schemas with zod's own JSON Schema conversion, so it cannot drift from what the edge
 * validates. Served at GET /syncx/openapi.json (functions/meta.ts) for generating other clients.
 * Request bodies are described as the edge accepts them (zod input), answers as the server
 * writes them (zod output).
 */
import * as z from 'zod/mini';
import './zod.js';
import { errorRegistry, type ErrorCode } from '../errors.js';
import { COMMON_META_ERRORS, COMMON_SYNC_ERRORS, ErrorBody, OPERATIONS, type Operation } from './operations.js';
import { MIN_PROTOCOL_VERSION, PROTOCOL_HEADER, PROTOCOL_VERSION, SOURCE_ID_HEADER } from './version.js';

type Json = Record<string, unknown>;

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });

/** Every named schema as a JSON Schema (draft 2020-12, OpenAPI 3.1's dialect), without `$schema`. */
function components(): Record<string, Json> {
  const named = new Map<string, { schema: z.ZodMiniType; io: 'input' | 'output' }>([['ErrorBody', { schema: ErrorBody, io: 'output' }]]);
  for (const op of OPERATIONS) {
    if (op.body) named.set(op.body.name, { schema: op.body.schema, io: 'input' });
    if (op.ok.name && op.ok.schema) named.set(op.ok.name, { schema: op.ok.schema, io: 'output' });
    for (const other of Object.values(op.other ?? {})) named.set(other.name, { schema: other.schema, io: 'output' });
  }
  const out: Record<string, Json> = {};
  for (const [name, { schema, io }] of [...named].sort(([a], [b]) => a.localeCompare(b))) {
    const { $schema: _dialect, ...json } = z.toJSONSchema(schema, { target: 'draft-2020-12', io, unrepresentable: 'any' }) as Json;
    out[name] = json;
  }
  return out;
}

/** Error answers grouped by HTTP status, each listing its codes. */
function errorResponses(codes: readonly ErrorCode[]): Record<string, Json> {
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of [...new Set(codes)]) {
    const status = errorRegistry[code].status;
    byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  const out: Record<string, Json> = {};
  for (const [status, list] of [...byStatus].sort(([a], [b]) => a - b)) {
    out[String(status)] = {
      description: list.map((c) => `\`${c}\`: ${errorRegistry[c].remedy}`).join(' '),
      'x-error-codes': list,
      ...(status === 429 || status === 503 ? { headers: { 'Retry-After': { description: 'Seconds to wait before retrying.', schema: { type: 'integer' } } } } : {}),
      content: { 'application/json': { schema: ref('ErrorBody') } },
    };
  }
  return out;
}

function parameters(op: Operation): Json[] {
  const out: Json[] = [];
  for (const [name, kind] of Object.entries(op.pathParameters ?? {})) {
    const schema = kind === 'uuid' ? { type: 'string', format: 'uuid' } : kind === 'string' ? { type: 'string', minLength: 1 } : { type: 'integer', minimum: 0 };
    out.push({ name, in: 'path', required: true, schema });
  }
  for (const q of op.query ?? []) out.push({ name: q.name, in: 'query', required: false, description: q.description, schema: q.values ? { type: 'string', enum: [...q.values] } : { type: 'integer', minimum: q.minimum ?? 0 } });
  if (op.auth === true) {
    out.push({
      name: 'Sync-Source-ID',
      in: 'header',
      required: true,
      description: `This device's source id (header \`${SOURCE_ID_HEADER}\`): 1-128 characters of [A-Za-z0-9._:-].`,
      schema: { type: 'string', pattern: '^[A-Za-z0-9._:-]{1,128}$' },
    });
    out.push({
      name: 'Sync-Protocol-Version',
      in: 'header',
      required: false,
      description: `The protocol the client speaks (header \`${PROTOCOL_HEADER}\`, default 1); 2 sends and answers json and jsonb values as a JSON string of their text. Every answer names its protocol in the same header.`,
      schema: { type: 'integer', minimum: MIN_PROTOCOL_VERSION, maximum: PROTOCOL_VERSION },
    });
  }
  return out;
}

function operation(op: Operation): Json {
  const responses: Record<string, Json> = {
    [String(op.ok.status)]: op.ok.name
      ? { description: 'OK', content: { 'application/json': { schema: ref(op.ok.name) } } }
      : { description: 'Done (no body).' },
  };
  for (const [status, other] of Object.entries(op.other ?? {})) responses[status] = { description: other.description, content: { 'application/json': { schema: ref(other.name) } } };
  Object.assign(responses, errorResponses([...(op.auth === true ? COMMON_SYNC_ERRORS : COMMON_META_ERRORS), ...op.errors]));
  return {
    operationId: op.operationId,
    summary: op.summary,
    ...(op.auth === true ? {} : { security: op.auth === 'operator' ? [{ operator: [] }] : [] }),
    parameters: parameters(op),
    ...(op.body
      ? { requestBody: { required: !op.body.optional, content: { 'application/json': { schema: ref(op.body.name) } } } }
      : {}),
    responses,
  };
}

/** The OpenAPI 3.1 document of this build. */
export function openApiDocument(): Json {
  const paths: Record<string, Json> = {};
  for (const op of OPERATIONS) paths[op.path] = { ...paths[op.path], [op.method.toLowerCase()]: operation(op) };
  return {
    openapi: '3.1.0',
    info: {
      title: 'Lockstep sync API',
      version: String(PROTOCOL_VERSION),
      description: 'Keeps SQLite databases on devices in step with an authoritative PostgreSQL. The protocol in prose: docs/protocol.md.',
    },
    security: [{ bearer: [] }],
    paths,
    components: {
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT', description: 'The user id is the verified `sub` claim (configurable).' },
        // API Gateway's AWS_IAM authorization: the request is signed with AWS Signature Version 4.
        operator: { type: 'apiKey', in: 'header', name: 'Authorization', description: 'AWS Signature Version 4 of an IAM principal allowed execute-api:Invoke on the operator routes (locally: Bearer LOCKSTEP_OPERATOR_TOKEN).' },
      },
      schemas: components(),
    },
  };
}
