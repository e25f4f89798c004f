/** Bad usage or bad input the user can fix: printed without a stack trace, exit status 2. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}
