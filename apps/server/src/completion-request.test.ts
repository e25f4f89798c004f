import { describe, expect, it } from 'vitest';
import { ApiError } from './api-error.js';
import { parseCompletionRequest } from './completion-request.js';
import { parseServerArgs } from './server-args.js';

const limits = { maxTokens: 64, maxN: 16, maxPrompts: 64, maxRowsPerRequest: 100 };

const refusal = (body: unknown) => {
  try {
    parseCompletionRequest(body, limits);
  } catch (err) {
    expect(err).toBeInstanceOf(ApiError);
    return err as ApiError;
  }
  throw new Error('the request was accepted');
};

describe('parseCompletionRequest', () => {
  it('refuses more rows (prompts × n) than --max-rows-per-request, with the numbers', () => {
    const err = refusal({ prompt: Array.from({ length: 10 }, (_, i) => `p${i}`), n: 11 });
    expect(err.status).toBe(400);
    expect(err.param).toBe('n');
    expect(err.message).toBe(
      "10 prompts × n 11 = 110 rows in one request, above this server's limit of 100 rows (--max-rows-per-request); split the request or ask for a smaller n",
    );
    expect(parseCompletionRequest({ prompt: Array.from({ length: 10 }, (_, i) => `p${i}`), n: 10 }, limits).n).toBe(10);
  });

  it('defaults the row bound to 1024, the most the other default limits allow', () => {
    const { maxRowsPerRequest: _, ...defaults } = limits;
    const prompt = Array.from({ length: 64 }, (_, i) => `p${i}`);
    expect(parseCompletionRequest({ prompt, n: 16 }, defaults).prompts).toHaveLength(64);
    expect(() => parseCompletionRequest({ prompt, n: 16 }, { ...defaults, maxN: 17 })).not.toThrow();
    expect(() => parseCompletionRequest({ prompt, n: 17 }, { ...defaults, maxN: 17 })).toThrow(/1088 rows in one request, above this server's limit of 1024 rows/);
  });

  it('accepts stream and stream_options.include_usage', () => {
    expect(parseCompletionRequest({ prompt: 'x', stream: true }, limits)).toMatchObject({ stream: true, includeUsage: false });
    expect(parseCompletionRequest({ prompt: 'x', stream: true, stream_options: { include_usage: true } }, limits)).toMatchObject({ stream: true, includeUsage: true });
    expect(parseCompletionRequest({ prompt: 'x' }, limits)).toMatchObject({ stream: false, includeUsage: false });
    expect(refusal({ prompt: 'x', stream_options: { include_usage: true } }).param).toBe('stream_options');
    expect(refusal({ prompt: 'x', stream: true, stream_options: { include_usage: 'yes' } }).param).toBe('stream_options');
  });
});

describe('flexhelm-server flags for the completions bounds', () => {
  it('reads --max-rows-per-request and --max-response-entries, with defaults 1024 and 262144', () => {
    expect(parseServerArgs([], {})).toMatchObject({ maxRowsPerRequest: 1024, maxResponseEntries: 262_144 });
    expect(parseServerArgs(['--max-rows-per-request', '64', '--max-response-entries', '1000000'], {})).toMatchObject({ maxRowsPerRequest: 64, maxResponseEntries: 1_000_000 });
    expect(() => parseServerArgs(['--max-rows-per-request', '0'], {})).toThrow("--max-rows-per-request must be an integer ≥ 1, got '0'");
    expect(() => parseServerArgs(['--max-response-entries', 'lots'], {})).toThrow("--max-response-entries must be an integer ≥ 1, got 'lots'");
  });
});
