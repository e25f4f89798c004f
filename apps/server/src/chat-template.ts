import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { Template } from '@huggingface/jinja';

/** A chat template that cannot be read or compiled: the model folder's to fix; the message names the file and why. */
export class ChatTemplateError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ChatTemplateError';
  }
}

/** A model's chat template and the special-token strings templates refer to. */
export interface ChatTemplate {
  /** Jinja source. */
  source: string;
  /** Where it came from (for messages). */
  file: string;
  bosToken?: string;
  eosToken?: string;
}

const MAX_CONFIG_BYTES = 16 * 1024 * 1024;

function readText(path: string): string {
  const size = statSync(path).size;
  if (!statSync(path).isFile()) throw new ChatTemplateError(`${path} is not a regular file`);
  if (size > MAX_CONFIG_BYTES) throw new ChatTemplateError(`${path} is ${size} bytes, above the ${MAX_CONFIG_BYTES}-byte limit for a tokenizer config; is it the right file?`);
  return readFileSync(path, 'utf8');
}

/** `tokenizer_config.json` writes special tokens as a string or as an AddedToken object `{ "content": … }`. */
function tokenString(value: unknown, key: string, file: string): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value === 'string') return value;
  const content = (value as { content?: unknown }).content;
  if (typeof content === 'string') return content;
  throw new ChatTemplateError(`${file}: ${key} is ${JSON.stringify(value).slice(0, 80)}; it must be a string or an object with a "content" string`);
}

/**
 * The chat template of a Hugging Face model folder, or undefined when it has none: `chat_template` in
 * `tokenizer_config.json` (a string, or transformers' list of named templates, of which `default` is used), else a
 * `chat_template.jinja` file beside it. The template is compiled here, so a broken one fails at startup.
 */
export function readChatTemplate(folder: string): ChatTemplate | undefined {
  const configPath = join(folder, 'tokenizer_config.json');
  let config: Record<string, unknown> = {};
  if (existsSync(configPath)) {
    const text = readText(configPath);
    try {
      const parsed: unknown = JSON.parse(text);
      if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) throw new Error('not a JSON object');
      config = parsed as Record<string, unknown>;
    } catch (err) {
      throw new ChatTemplateError(`${configPath} is not a valid tokenizer config (${(err as Error).message}); restore it from the model's repository`);
    }
  }
  let source: string | undefined;
  let file = configPath;
  const raw = config.chat_template;
  if (typeof raw === 'string') source = raw;
  else if (Array.isArray(raw)) {
    const named = raw.filter((t): t is { name: string; template: string } => typeof t?.name === 'string' && typeof t?.template === 'string');
    const chosen = named.find((t) => t.name === 'default');
    if (!chosen) throw new ChatTemplateError(`${configPath}: chat_template lists templates named ${named.map((t) => JSON.stringify(t.name)).join(', ') || '(none)'}, but none is named "default"`);
    source = chosen.template;
  } else if (raw !== undefined && raw !== null) {
    throw new ChatTemplateError(`${configPath}: chat_template must be a string or a list of {"name", "template"} objects`);
  } else {
    const jinjaPath = join(folder, 'chat_template.jinja');
    if (existsSync(jinjaPath)) {
      source = readText(jinjaPath);
      file = jinjaPath;
    }
  }
  if (source === undefined) return undefined;
  try {
    new Template(source);
  } catch (err) {
    throw new ChatTemplateError(`${file}: the chat template does not compile: ${(err as Error).message}`);
  }
  return { source, file, bosToken: tokenString(config.bos_token, 'bos_token', configPath), eosToken: tokenString(config.eos_token, 'eos_token', configPath) };
}
