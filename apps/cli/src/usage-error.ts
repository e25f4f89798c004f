/** Bad usage or bad input the user can fix: printed without a stack trace, exit status 2. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

/**
 * A file, folder or value the user must fix that is not a command-line mistake (a damaged cache, a read-only output
 * folder): one line saying what and how, exit status 2, without the `--help` hint a UsageError gets.
 */
export class InputError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'InputError';
  }
}
