/**
 * A start that cannot go on, told in one line with its cause and its fix (and, where it helps,
 * a few lines of evidence such as the tail of PostgreSQL's log). `npm start` prints it without a
 * stack trace and exits 1.
 */
export class StartupError extends Error {
  constructor(
    message: string,
    /** Lines printed under the message, indented. */
    readonly details: readonly string[] = [],
  ) {
    super(message);
    this.name = 'StartupError';
  }
}
