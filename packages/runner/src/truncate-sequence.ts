import type { Request, Sequence, Token } from '@flexhelm/core';

const sumLogprobs = (tokens: readonly Token[]): number => tokens.reduce((s, t) => s + t.logprob, 0);

/**
 * HELM 0.2.1's `truncate_sequence` (proxy/clients/client.py): cut the completion at the first occurrence of each
 * stop sequence in turn (text by `str.index`, tokens at the first token whose text starts with the stop), then to
 * `max_tokens` tokens, recomputing the logprob. Echo requests are left alone. Like HELM, a cut drops `finish_reason`.
 */
export function truncateSequence(sequence: Sequence, request: Request): Sequence {
  if (request.echo_prompt) return sequence;
  let seq = sequence;
  for (const stop of request.stop_sequences) {
    const at = seq.text.indexOf(stop);
    const text = at >= 0 ? seq.text.slice(0, at) : seq.text;
    const tokens: Token[] = [];
    for (const token of seq.tokens) {
      if (token.text.startsWith(stop)) break;
      tokens.push(token);
    }
    seq = { text, logprob: sumLogprobs(tokens), tokens };
  }
  if (seq.tokens.length > request.max_tokens) {
    const tokens = seq.tokens.slice(0, request.max_tokens);
    seq = { text: tokens.map((t) => t.text).join(''), logprob: sumLogprobs(tokens), tokens };
  }
  return seq;
}
