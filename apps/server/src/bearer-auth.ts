import { createHash, timingSafeEqual } from 'node:crypto';
import { ApiError } from './api-error.js';

const digest = (s: string) => createHash('sha256').update(s).digest();

/** A check of `Authorization: Bearer <key>` against `apiKey` (none: everything passes); throws 401 otherwise. */
export function bearerAuth(apiKey: string | undefined): (authorization: string | undefined) => void {
  if (apiKey === undefined) return () => {};
  if (apiKey.length < 8) throw new Error('the API key must be at least 8 characters long');
  const keyDigest = digest(apiKey);
  return (authorization) => {
    const match = /^Bearer\s+(.+)$/i.exec(authorization ?? '');
    // Digests have one length, so the comparison takes the same time whatever the key sent.
    if (!match || !timingSafeEqual(digest(match[1]!.trim()), keyDigest)) {
      throw new ApiError(401, match ? 'Incorrect API key provided.' : 'Missing API key: send the header "Authorization: Bearer <key>".', 'invalid_request_error', null, 'invalid_api_key');
    }
  };
}
