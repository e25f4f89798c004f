import type { DecoderBackend } from '@flexhelm/engine';
import { OrtBackend } from '@flexhelm/ort-backend';
import { hasFastIsa, OneDnnBackend, oneDnnStatus, type ComputeDtype, type OneDnnBackendOptions } from '@flexhelm/onednn-backend';

export interface SelectBackendOptions extends Omit<OneDnnBackendOptions, 'dtype'> {
  /** Compute dtype on oneDNN (default `auto`); the onnxruntime fallback always computes fp32. */
  dtype?: ComputeDtype | 'auto';
  /** onnxruntime intra-op threads for the fallback. */
  intraOpNumThreads?: number;
}

export interface BackendSelection {
  backend: DecoderBackend;
  kind: 'onednn' | 'onnxruntime';
  /** One line saying which backend and why. */
  notice: string;
}

/**
 * Picks the compute backend: oneDNN when the addon and libdnnl load and the CPU has AMX or AVX-512 (where its
 * bf16/int8 GEMMs beat onnxruntime's fp32), onnxruntime otherwise.
 */
export function selectBackend(options: SelectBackendOptions = {}): BackendSelection {
  const { intraOpNumThreads, ...oneDnnOptions } = options;
  const dtype = options.dtype ?? 'auto';
  const fallback = (why: string): BackendSelection => ({
    backend: new OrtBackend({ intraOpNumThreads }),
    kind: 'onnxruntime',
    notice: `backend: onnxruntime fp32${dtype !== 'auto' && dtype !== 'fp32' ? ` (${dtype} needs oneDNN)` : ''}, because ${why}`,
  });
  const status = oneDnnStatus();
  if (!status.available) return fallback(`oneDNN is unavailable: ${status.reason}`);
  const isa = hasFastIsa(status.features);
  if (!isa.fast) return fallback(`this CPU offers oneDNN only ${isa.what} (no AMX or AVX-512), where it is no faster`);
  const backend = new OneDnnBackend({ ...oneDnnOptions, dtype });
  const impl = dtype === 'int8' ? status.features.int8Impl : dtype === 'fp32' ? status.features.f32Impl : status.features.bf16Impl;
  // A GGUF file's blocks: `auto` computes in fp32 around them (the backend's `quantized` option), without the gate.
  const how = dtype === 'auto' && options.quantized ? 'dtype auto: fp32 around the ggml blocks' : dtype === 'auto' ? `dtype auto (fastest of ${options.experimental ? 'int8, ' : ''}bf16, fp32 passing the accuracy gate on the first batch)` : `dtype ${dtype}`;
  return { backend, kind: 'onednn', notice: `backend: oneDNN ${status.features.version} on ${isa.what} (${impl}), ${how}` };
}

/** `selectBackend` for callers that only want the backend; the notice goes to `log` (default stderr). */
export function createFastestBackend(options: SelectBackendOptions & { log?: (line: string) => void } = {}): DecoderBackend {
  const { log, ...rest } = options;
  const selection = selectBackend(rest);
  (log ?? ((line: string) => console.error(line)))(selection.notice);
  return selection.backend;
}
