/** Messages between the main thread and the onnxruntime worker (ort-session-worker.ts). */
export interface WireTensor {
  type: 'float32' | 'int64' | 'int32';
  data: Float32Array | BigInt64Array | Int32Array;
  dims: number[];
}

/** A feed taken from an earlier run of the same chain: `run` index and output name. */
export interface ChainRef {
  run: number;
  output: string;
}

/** One session run inside a chain; feeds may reference earlier runs' outputs. */
export interface ChainRun {
  key: string;
  feeds: Record<string, WireTensor | ChainRef>;
  shared: string[];
  /** Feed name → shared tensor name. */
  sharedAs?: Record<string, string>;
}

export type WorkerRequest =
  | { id: number; kind: 'create'; key: string; model: Uint8Array }
  | { id: number; kind: 'run'; key: string; feeds: Record<string, WireTensor>; shared: string[]; sharedAs?: Record<string, string> }
  | { id: number; kind: 'setShared'; name: string; tensor: WireTensor }
  | { id: number; kind: 'release'; key: string }
  /** Several runs in one round trip; replies with the listed outputs, keyed `<run>:<name>`. */
  | { id: number; kind: 'chain'; runs: ChainRun[]; results: ChainRef[] };

export type WorkerReply = { id: number; ok: true; outputs?: Record<string, WireTensor> } | { id: number; ok: false; error: string };
