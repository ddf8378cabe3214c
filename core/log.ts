/**
 * Where the core's few operational events go (a commit outcome it could not record, an operator
 * note that failed): one JSON line each on the console, unless the process routes them elsewhere.
 * Lambda routes them into its structured logger (functions/edge/telemetry.ts), so they carry the
 * request id like every other line; core never depends on a logging library.
 */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error';
export type LogFields = Readonly<Record<string, unknown>>;
export type LogSink = (level: LogLevel, event: string, fields: LogFields) => void;

const consoleSink: LogSink = (level, event, fields) => {
  if (level === 'debug') return;
  console[level](JSON.stringify({ level, event, ...fields }));
};

let sink: LogSink = consoleSink;

export function logEvent(level: LogLevel, event: string, fields: LogFields = {}): void {
  sink(level, event, fields);
}

/** Routes every later event to `next` (`undefined`: back to the console). */
export function setLogSink(next: LogSink | undefined): void {
  sink = next ?? consoleSink;
}
