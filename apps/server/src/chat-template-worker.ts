// Renders chat templates off the main thread, so a template that runs away (a huge loop over a client's messages)
// can be stopped by terminating this worker instead of freezing the server.
import { parentPort, workerData } from 'node:worker_threads';
import { Template } from '@huggingface/jinja';
import type { RenderReply, RenderRequest, RendererData } from './chat-template-protocol.js';

const data = workerData as RendererData;
const template = new Template(data.source);

parentPort!.on('message', (request: RenderRequest) => {
  let reply: RenderReply;
  try {
    const text = template.render({
      messages: request.messages,
      add_generation_prompt: true,
      bos_token: data.bosToken ?? '',
      eos_token: data.eosToken ?? '',
    });
    reply = text.length > data.maxChars ? { id: request.id, error: `the rendered prompt has ${text.length} characters, above the limit of ${data.maxChars}` } : { id: request.id, text };
  } catch (err) {
    reply = { id: request.id, error: (err as Error).message ?? String(err) };
  }
  parentPort!.postMessage(reply);
});
