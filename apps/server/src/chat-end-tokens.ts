import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Tokenizer } from '@flexhelm/core';
import type { ChatTemplate } from './chat-template.js';
import { ChatTemplateError } from './chat-template.js';

interface TokenNaming {
  tokenToId(token: string): number | undefined;
}

function idOf(tokenizer: Tokenizer, token: string): number | undefined {
  const named = (tokenizer as Partial<TokenNaming>).tokenToId?.(token);
  if (named !== undefined) return named;
  const ids = tokenizer.encode(token).map(Number);
  return ids.length === 1 ? ids[0] : undefined;
}

/**
 * The token ids that end an assistant turn: the model's eos, every `eos_token_id` of `generation_config.json` (a number
 * or a list: Llama 3 Instruct lists `<|end_of_text|>`, `<|eom_id|>` and `<|eot_id|>`), the tokenizer config's
 * `eos_token`, and an end-of-turn marker the template writes when the tokenizer has it as one token (`markers`: the
 * family entry's `chat.endOfTurn`, such as Gemma's `<end_of_turn>` or Phi-3's `<|end|>`).
 */
export function chatEndTokenIds(folder: string, tokenizer: Tokenizer, template: ChatTemplate, modelEos: number | undefined, markers: readonly string[]): number[] {
  const ids = new Set<number>();
  if (modelEos !== undefined && modelEos >= 0) ids.add(modelEos);
  const generationPath = join(folder, 'generation_config.json');
  if (existsSync(generationPath)) {
    let eos: unknown;
    try {
      eos = (JSON.parse(readFileSync(generationPath, 'utf8')) as { eos_token_id?: unknown } | null)?.eos_token_id;
    } catch (err) {
      throw new ChatTemplateError(`${generationPath} is not valid JSON (${(err as Error).message}); restore it from the model's repository`);
    }
    for (const id of eos === undefined || eos === null ? [] : Array.isArray(eos) ? eos : [eos]) {
      if (!Number.isInteger(id) || (id as number) < 0) throw new ChatTemplateError(`${generationPath}: eos_token_id holds ${JSON.stringify(id)}; token ids are non-negative integers`);
      ids.add(id as number);
    }
  }
  for (const token of [template.eosToken, ...markers.filter((m) => template.source.includes(m))]) {
    if (token === undefined) continue;
    const id = idOf(tokenizer, token);
    if (id !== undefined) ids.add(id);
  }
  return [...ids];
}
