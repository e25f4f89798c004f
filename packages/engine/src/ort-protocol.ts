/** Messages between the main thread and the onnxruntime worker (ort-session-worker.ts). */
export interface WireTensor {
  type: 'float32' | 'int64' | 'int32';
  data: Float32Array | BigInt64Array | Int32Array;
  dims: number[];
}

export type WorkerRequest =
  | { id: number; kind: 'create'; key: string; model: Uint8Array }
  | { id: number; kind: 'run'; key: string; feeds: Record<string, WireTensor>; shared: string[]; sharedAs?: Record<string, string> }
  | { id: number; kind: 'setShared'; name: string; tensor: WireTensor }
  | { id: number; kind: 'release'; key: string };

export type WorkerReply = { id: number; ok: true; outputs?: Record<string, WireTensor> } | { id: number; ok: false; error: string };
