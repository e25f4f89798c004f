// Renders chat templates and tokenizes prompts off the main thread: a template that runs away can be stopped by
// terminating this worker, and a long prompt's tokenization never holds the event loop (health checks, other requests).
import { parentPort, workerData } from 'node:worker_threads';
import { lowerThisThreadPriority } from './background-thread.js';
import { Template } from '@huggingface/jinja';
import { loadTokenizerFolder } from '@flexhelm/tokenizer';
import type { TextJob, TextReply, TextWorkerData } from './text-worker-protocol.js';

const data = workerData as TextWorkerData;
if (data.background) lowerThisThreadPriority(); // the event loop first: health checks answer while this thread tokenizes
const template = data.template && new Template(data.template.source);
const tokenizer = data.tokenizerFolder === undefined ? undefined : loadTokenizerFolder(data.tokenizerFolder, data.tokenizerName);
const encode = (text: string) => (text === '' || !tokenizer ? [] : tokenizer.encode(text).map(Number));

function run(job: TextJob): TextReply {
  if (job.kind === 'encode') {
    try {
      return { id: job.id, ids: job.texts.map(encode) };
    } catch (err) {
      return { id: job.id, error: (err as Error).message ?? String(err), stage: 'encode' };
    }
  }
  if (job.kind === 'decode') {
    try {
      if (!tokenizer) throw new Error('this worker has no tokenizer');
      const idToToken = (tokenizer as Partial<{ idToToken(id: number): string | undefined }>).idToToken?.bind(tokenizer);
      const decoded = job.pieces ? job.ids.map((id) => idToToken?.(id) ?? tokenizer.decode([id])) : job.ids.length === 0 ? '' : tokenizer.decode(job.ids);
      return { id: job.id, decoded };
    } catch (err) {
      return { id: job.id, error: (err as Error).message ?? String(err), stage: 'encode' };
    }
  }
  let text: string;
  try {
    if (!template) throw new Error('this model has no chat template');
    parentPort!.postMessage({ id: job.id, started: true } satisfies TextReply);
    text = template.render({
      messages: job.messages,
      add_generation_prompt: true,
      bos_token: data.template?.bosToken ?? '',
      eos_token: data.template?.eosToken ?? '',
    });
  } catch (err) {
    return { id: job.id, error: (err as Error).message ?? String(err), stage: 'render' };
  }
  parentPort!.postMessage({ id: job.id, rendered: true } satisfies TextReply);
  if (text.length > data.maxRenderChars) return { id: job.id, error: `the rendered prompt has ${text.length} characters, above the limit of ${data.maxRenderChars}`, stage: 'render' };
  if (!job.encode) return { id: job.id, text, ids: [] };
  if (job.maxChars !== undefined && text.length > job.maxChars) return { id: job.id, tooLong: text.length };
  try {
    return { id: job.id, text, ids: [encode(text)] };
  } catch (err) {
    return { id: job.id, error: (err as Error).message ?? String(err), stage: 'encode' };
  }
}

parentPort!.on('message', (job: TextJob) => parentPort!.postMessage(run(job)));
