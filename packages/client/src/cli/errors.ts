/** A mistake in how the command was called or configured: printed without a stack, exit status 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}
