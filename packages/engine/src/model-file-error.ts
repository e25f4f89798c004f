/**
 * A model file the user supplied is malformed (config.json, shard index, weights): the message names the file and
 * the field or tensor, and says what to fix. Front ends report it as a user error (exit 2, one line), not a crash.
 */
export class ModelFileError extends Error {
  override name = 'ModelFileError';
}
