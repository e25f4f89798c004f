import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { ApiError } from './api-error.js';
import type { ChatTemplate } from './chat-template.js';
import { TEXT_WORKER_HEAP_MIB, threadLimits } from './server-memory-plan.js';
import type { TemplateMessage, TextJob, TextReply, TextWorkerData } from './text-worker-protocol.js';

/** The compiled worker: beside this module, or in dist/ when this module runs from src/ (vitest). */
function workerPath(): string {
  const here = fileURLToPath(new URL('./text-worker.js', import.meta.url));
  if (existsSync(here)) return here;
  const dist = here.replace(/([\\/])src([\\/])text-worker\.js$/, '$1dist$2text-worker.js');
  if (existsSync(dist)) return dist;
  throw new Error(`text worker not found at ${here} or ${dist}: build @flexhelm/server first`);
}

export interface TextWorkersOptions {
  /** The model folder whose tokenizer the workers load; without it `encode` is left to the caller. */
  tokenizerFolder?: string;
  /** The tokenizer's name (the model name). */
  tokenizerName: string;
  /** The chat template `render` uses. */
  template?: ChatTemplate;
  /** Shown in errors instead of a path (the model id: clients never see the server's folders). */
  modelLabel: string;
  /** Worker threads. Default 2. */
  threads?: number;
  /** Jobs waiting for a worker beyond which new ones are refused with 503. Default 256. */
  maxQueue?: number;
  /** Longest one rendering may take, timed from when a worker starts it (ms). Default 2000. */
  renderTimeoutMs?: number;
  /** Longest rendered prompt (characters). Default 4 Mi. */
  maxRenderChars?: number;
  /**
   * Run the threads below the event loop's priority (nice 10 on Linux): for bulk tokenizing and decoding, so that
   * health checks and small requests come first on a machine with fewer cores than busy threads. Not for a pool that
   * renders chat templates: their time limit is wall-clock, and a starved thread would run it out. Default false.
   */
  background?: boolean;
}

interface Job {
  job: TextJob;
  resolve: (reply: TextReply) => void;
  reject: (err: Error) => void;
}

interface Slot {
  worker: Worker;
  job?: Job;
  timer?: NodeJS.Timeout;
}

/**
 * A bounded pool of worker threads that render chat templates and tokenize prompts, so neither ever runs on the event
 * loop. Each worker takes one job at a time, in arrival order; a rendering that runs longer than `renderTimeoutMs`
 * (timed from its start, never from its wait in the queue or the worker's start-up) is refused with a 400 and its worker replaced. When
 * `maxQueue` jobs already wait, a new one is refused at once with a 503 rather than queued without bound.
 */
/** The request field a failed job's 400 names. */
function paramOf(job: TextJob): string {
  return job.kind === 'render' ? 'messages' : job.kind === 'decode' ? 'tokens' : 'prompt';
}

export class TextWorkers {
  private readonly slots: Slot[] = [];
  private readonly queue: Job[] = [];
  private nextId = 1;
  private closed = false;
  private readonly threads: number;
  private readonly maxQueue: number;
  private readonly renderTimeoutMs: number;
  private readonly data: TextWorkerData;

  constructor(private readonly options: TextWorkersOptions) {
    this.threads = Math.max(1, options.threads ?? 2);
    this.maxQueue = options.maxQueue ?? 256;
    this.renderTimeoutMs = options.renderTimeoutMs ?? 2000;
    const t = options.template;
    this.data = {
      tokenizerFolder: options.tokenizerFolder,
      tokenizerName: options.tokenizerName,
      template: t && { source: t.source, bosToken: t.bosToken, eosToken: t.eosToken },
      maxRenderChars: options.maxRenderChars ?? 4 * 1024 * 1024,
      background: options.background ?? false,
    };
  }

  /** Whether `encode` tokenizes in the workers (else the caller tokenizes). */
  get encodes(): boolean {
    return this.options.tokenizerFolder !== undefined;
  }

  /** Token ids of each text, without special tokens (the tokenizer's `encode`). */
  async encode(texts: string[]): Promise<number[][]> {
    const reply = await this.submit({ id: this.nextId++, kind: 'encode', texts });
    return (reply as { ids: number[][] }).ids;
  }

  /** `ids` as text (`pieces`: one string per id, the vocabulary's own piece where it has one) in a worker. */
  async decode(ids: number[], pieces: boolean): Promise<string | string[]> {
    const reply = await this.submit({ id: this.nextId++, kind: 'decode', ids, pieces });
    return (reply as { decoded: string | string[] }).decoded;
  }

  /** The chat template's prompt for `messages`. */
  async render(messages: TemplateMessage[]): Promise<string> {
    const reply = await this.submit({ id: this.nextId++, kind: 'render', messages, encode: false });
    return (reply as { text: string }).text;
  }

  /**
   * The chat template's prompt and its token ids (tokenized in the same worker), or `{ tooLong: chars }` when the
   * rendered prompt is over `maxChars` characters (it is then not tokenized).
   */
  async renderAndEncode(messages: TemplateMessage[], maxChars?: number): Promise<{ text: string; ids: number[] } | { tooLong: number }> {
    const reply = await this.submit({ id: this.nextId++, kind: 'render', messages, encode: this.encodes, maxChars });
    if ('tooLong' in reply) return reply;
    const r = reply as { text: string; ids: number[][] };
    return { text: r.text, ids: r.ids[0] ?? [] };
  }

  private submit(job: TextJob): Promise<TextReply> {
    if (this.closed) return Promise.reject(new ApiError(503, 'the server is shutting down', 'server_error'));
    if (this.queue.length >= this.maxQueue) {
      return Promise.reject(
        new ApiError(503, `the server is busy: ${this.queue.length} prompts already wait to be tokenized or rendered; retry in a moment`, 'server_error', null, 'server_busy'),
      );
    }
    return new Promise((resolve, reject) => {
      this.queue.push({ job, resolve, reject });
      this.dispatch();
    });
  }

  private dispatch(): void {
    while (this.queue.length > 0 && !this.closed) {
      let slot = this.slots.find((s) => !s.job);
      if (!slot && this.slots.length < this.threads) slot = this.start();
      if (!slot) return;
      const job = this.queue.shift()!;
      slot.job = job;
      slot.worker.postMessage(job.job);
    }
  }

  private start(): Slot {
    const worker = new Worker(workerPath(), { workerData: this.data, resourceLimits: threadLimits(TEXT_WORKER_HEAP_MIB) }); // counted in the server's RAM plan
    worker.unref();
    const slot: Slot = { worker };
    this.slots.push(slot);
    worker.on('message', (reply: TextReply) => this.reply(slot, reply));
    // A worker that dies (out of memory on a runaway template) fails the job it held; a new one takes the queue.
    worker.on('error', (err) => this.lost(slot, err.message));
    worker.on('exit', () => this.lost(slot, 'the worker stopped'));
    return slot;
  }

  private reply(slot: Slot, reply: TextReply): void {
    const job = slot.job;
    if (!job || job.job.id !== reply.id) return;
    clearTimeout(slot.timer);
    slot.timer = undefined;
    // The clock starts when the worker starts rendering: waiting behind others, or for a new worker to load, never counts.
    if ('started' in reply) {
      slot.timer = setTimeout(() => this.timeout(slot), this.renderTimeoutMs);
      return;
    }
    if ('rendered' in reply) return; // tokenizing follows, untimed (the caller bounded the text)
    slot.job = undefined;
    if ('error' in reply) {
      const what =
        reply.stage === 'render'
          ? `the chat template of ${this.options.modelLabel} refused these messages`
          : job.job.kind === 'decode'
            ? `the tokenizer of ${this.options.modelLabel} could not decode these tokens`
            : `the tokenizer of ${this.options.modelLabel} failed on this prompt`;
      job.reject(new ApiError(400, `${what}: ${reply.error}`, 'invalid_request_error', paramOf(job.job)));
    } else job.resolve(reply);
    this.dispatch();
  }

  private timeout(slot: Slot): void {
    const job = slot.job;
    if (!job) return;
    this.drop(slot);
    job.reject(new ApiError(400, `the chat template of ${this.options.modelLabel} took longer than ${this.renderTimeoutMs} ms to render these messages; send fewer or shorter messages`, 'invalid_request_error', 'messages'));
    this.dispatch();
  }

  private lost(slot: Slot, reason: string): void {
    if (!this.slots.includes(slot)) return;
    const job = slot.job;
    this.drop(slot);
    const what = job?.job.kind === 'render' ? `chat template of ${this.options.modelLabel} could not render these messages` : job?.job.kind === 'decode' ? 'tokens could not be decoded' : 'prompt could not be tokenized';
    job?.reject(new ApiError(400, `the ${what} (${reason})`, 'invalid_request_error', paramOf(job.job)));
    this.dispatch();
  }

  private drop(slot: Slot): void {
    clearTimeout(slot.timer);
    slot.job = undefined;
    this.slots.splice(this.slots.indexOf(slot), 1);
    void slot.worker.terminate();
  }

  async close(): Promise<void> {
    this.closed = true;
    const stopping = new ApiError(503, 'the server is shutting down', 'server_error');
    for (const j of this.queue.splice(0)) j.reject(stopping);
    const slots = this.slots.splice(0);
    for (const s of slots) {
      clearTimeout(s.timer);
      s.job?.reject(stopping);
    }
    await Promise.all(slots.map((s) => s.worker.terminate()));
  }
}
