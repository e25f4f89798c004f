import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { ApiError } from './api-error.js';
import type { ChatTemplate } from './chat-template.js';
import type { RenderReply, TemplateMessage } from './chat-template-protocol.js';

/** The compiled worker: beside this module, or in dist/ when this module runs from src/ (vitest). */
function workerPath(): string {
  const here = fileURLToPath(new URL('./chat-template-worker.js', import.meta.url));
  if (existsSync(here)) return here;
  const dist = here.replace(/([\\/])src([\\/])chat-template-worker\.js$/, '$1dist$2chat-template-worker.js');
  if (existsSync(dist)) return dist;
  throw new Error(`chat template worker not found at ${here} or ${dist}: build @flexhelm/server first`);
}

export interface RendererOptions {
  /** Longest one rendering may take before the worker is stopped and the request refused (ms). Default 2000. */
  timeoutMs?: number;
  /** Longest rendered prompt (characters). Default 4 Mi. */
  maxChars?: number;
}

interface Pending {
  messages: TemplateMessage[];
  resolve: (text: string) => void;
  reject: (err: Error) => void;
  timer?: NodeJS.Timeout;
}

/**
 * Renders a model's chat template (`add_generation_prompt`, `bos_token`, `eos_token`, `raise_exception`) in a worker
 * thread. Renderings run one at a time in arrival order; one that takes longer than `timeoutMs` is refused with a 400
 * and the worker replaced, and the renderings queued behind it are sent to the new worker.
 */
export class ChatTemplateRenderer {
  private worker: Worker | undefined;
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private readonly timeoutMs: number;
  private readonly maxChars: number;
  private closed = false;

  constructor(
    readonly template: ChatTemplate,
    options: RendererOptions = {},
  ) {
    this.timeoutMs = options.timeoutMs ?? 2000;
    this.maxChars = options.maxChars ?? 4 * 1024 * 1024;
  }

  render(messages: TemplateMessage[]): Promise<string> {
    if (this.closed) return Promise.reject(new ApiError(503, 'the server is shutting down', 'server_error'));
    return new Promise((resolve, reject) => {
      const id = this.nextId++;
      this.pending.set(id, { messages, resolve, reject });
      this.send(id);
    });
  }

  private start(): Worker {
    const worker = new Worker(workerPath(), {
      workerData: { source: this.template.source, bosToken: this.template.bosToken, eosToken: this.template.eosToken, maxChars: this.maxChars },
      resourceLimits: { maxOldGenerationSizeMb: 512 },
    });
    worker.unref();
    worker.on('message', (reply: RenderReply) => {
      const p = this.pending.get(reply.id);
      if (!p) return;
      this.pending.delete(reply.id);
      clearTimeout(p.timer);
      if ('text' in reply) p.resolve(reply.text);
      else p.reject(new ApiError(400, `the model's chat template (${this.template.file}) refused these messages: ${reply.error}`, 'invalid_request_error', 'messages'));
    });
    // A worker that dies (out of memory on a runaway template) fails what it held; the next rendering starts a new one.
    worker.on('error', (err) => this.restart(worker, err.message));
    worker.on('exit', () => this.restart(worker, 'the renderer stopped'));
    return worker;
  }

  private send(id: number): void {
    const p = this.pending.get(id)!;
    this.worker ??= this.start();
    // The clock starts when the rendering is sent, and renderings run in order, so the first to run out is the one running.
    p.timer = setTimeout(() => this.timeout(id), this.timeoutMs);
    this.worker.postMessage({ id, messages: p.messages });
  }

  private timeout(id: number): void {
    const p = this.pending.get(id);
    if (!p) return;
    this.pending.delete(id);
    p.reject(new ApiError(400, `the model's chat template took longer than ${this.timeoutMs} ms to render these messages; send fewer or shorter messages`, 'invalid_request_error', 'messages'));
    const old = this.worker;
    this.worker = undefined;
    void old?.terminate();
    this.resend();
  }

  private restart(worker: Worker, reason: string): void {
    if (this.worker !== worker) return;
    this.worker = undefined;
    const first = this.pending.keys().next();
    if (!first.done) {
      const p = this.pending.get(first.value)!;
      this.pending.delete(first.value);
      clearTimeout(p.timer);
      p.reject(new ApiError(400, `the model's chat template could not render these messages (${reason})`, 'invalid_request_error', 'messages'));
    }
    this.resend();
  }

  private resend(): void {
    if (this.closed) return;
    for (const [id, p] of this.pending) {
      clearTimeout(p.timer);
      this.send(id);
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const p of this.pending.values()) {
      clearTimeout(p.timer);
      p.reject(new ApiError(503, 'the server is shutting down', 'server_error'));
    }
    this.pending.clear();
    const w = this.worker;
    this.worker = undefined;
    await w?.terminate();
  }
}
