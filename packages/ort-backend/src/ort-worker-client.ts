import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { WireTensor, WorkerReady, WorkerReply, WorkerRequest } from './ort-protocol.js';

type DistributiveOmit<T, K extends keyof T> = T extends unknown ? Omit<T, K> : never;

/** Where the compiled worker is: beside this module, or in dist/ when this module runs from src/ (vitest). */
function workerPath(): string {
  const here = fileURLToPath(new URL('./ort-session-worker.js', import.meta.url));
  if (existsSync(here)) return here;
  const dist = here.replace(/([\\/])src([\\/])ort-session-worker\.js$/, '$1dist$2ort-session-worker.js');
  if (existsSync(dist)) return dist;
  throw new Error(`onnxruntime worker not found at ${here} or ${dist}: build @flexhelm/engine first (pnpm turbo run build --filter=@flexhelm/engine)`);
}

/** Talks to one onnxruntime worker thread; requests are answered in order. */
export class OrtWorkerClient {
  private readonly worker: Worker;
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (r: WorkerReply) => void; reject: (e: Error) => void }>();
  private failure: Error | undefined;
  /** Called once no request is in flight (see `terminate`). */
  private drained: (() => void)[] = [];
  /** Settles once the thread has loaded onnxruntime's binding, or has stopped. */
  private readonly started: Promise<void>;
  private markStarted!: () => void;

  constructor(intraOpNumThreads?: number, executionProviders?: string[]) {
    this.started = new Promise((done) => {
      this.markStarted = done;
    });
    this.worker = new Worker(workerPath(), { workerData: { intraOpNumThreads, executionProviders } });
    this.worker.on('message', (reply: WorkerReply | WorkerReady) => {
      if ('ready' in reply) return this.markStarted();
      const p = this.pending.get(reply.id);
      this.pending.delete(reply.id);
      p?.resolve(reply);
      this.notifyIfDrained();
    });
    const fail = (err: Error) => {
      this.markStarted();
      this.failure = err;
      for (const p of this.pending.values()) p.reject(err);
      this.pending.clear();
      this.notifyIfDrained();
    };
    this.worker.on('error', (err) => fail(new Error(`onnxruntime worker crashed: ${err.message}`)));
    this.worker.on('exit', (code) => fail(new Error(`onnxruntime worker exited (code ${code})`)));
  }

  async request(msg: DistributiveOmit<WorkerRequest, 'id'>, transfer: ArrayBuffer[] = []): Promise<Record<string, WireTensor>> {
    if (this.failure) throw this.failure;
    const id = this.nextId++;
    const reply = await new Promise<WorkerReply>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.worker.postMessage({ ...msg, id }, transfer);
    });
    if (!reply.ok) throw new Error(`onnxruntime: ${reply.error}`);
    return reply.outputs ?? {};
  }

  private notifyIfDrained(): void {
    if (this.pending.size > 0) return;
    for (const done of this.drained.splice(0)) done();
  }

  /**
   * Refuses new requests, lets the ones in flight finish (at most `graceMs`), then stops the thread. A worker torn down
   * while onnxruntime is inside a session run aborts the whole process (the run's completion throws into a dead
   * environment: "terminate called after throwing an instance of 'Napi::Error'"), as Ctrl-C during a batch showed;
   * so does one torn down while it still loads onnxruntime's binding (an engine whose first disk write failed at
   * once), so the thread is first let finish starting.
   */
  async terminate(graceMs = 30_000): Promise<void> {
    this.failure ??= new Error('onnxruntime worker was terminated');
    await this.started;
    if (this.pending.size > 0) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        new Promise<void>((done) => this.drained.push(done)),
        new Promise<void>((done) => {
          timer = setTimeout(done, graceMs);
        }),
      ]);
      clearTimeout(timer);
    }
    await this.worker.terminate();
  }
}

/** The buffers of typed arrays that may be moved to the worker (whole-buffer views only, each once). */
export function transferable(...arrays: ArrayBufferView[]): ArrayBuffer[] {
  const out = new Set<ArrayBuffer>();
  for (const a of arrays) {
    if (a.buffer instanceof ArrayBuffer && a.byteOffset === 0 && a.byteLength === a.buffer.byteLength) out.add(a.buffer);
  }
  return [...out];
}
