import type { Measured } from './measured.js';

/** What identifies a machine and its compute stack: a cached profile is reused only while all of it is unchanged. */
export interface MachineKey {
  cpuModel: string;
  /** The CPU's feature flags (sorted, joined), e.g. avx512f avx512_bf16 … */
  cpuFlags: string;
  cores: number;
  totalRamBytes: number;
  /** Versions of the compute and I/O stack: onnxruntime, oneDNN (or 'none'), the pinned-memory addon (native or js). */
  backends: Record<string, string>;
  /** Bumped when the profile's contents change meaning. */
  schema: number;
}

/** The layer-call costs of one compute backend at one model's shapes (milliseconds). */
export interface BackendProfile {
  backend: string;
  /** Rows (batch × new tokens) at which the linear part of a layer was timed, ascending. */
  rows: number[];
  /** Decoder layer with resident (prepacked) weights at each of `rows`, context 1: the linear layers' cost. */
  residentMs: Measured[];
  /** Decoder layer whose weights are graph inputs (streamed), same rows; absent for backends that cannot stream. */
  streamedMs?: Measured[];
  /** Handing one streamed layer's fp32 weights to the backend (once per layer load). */
  setWeightsMs?: Measured;
  /** Linear-layer rate at each of `rows` (GFLOP/s, resident weights), for reports. */
  linearGflops: number[];
  /** Decode attention cost per (row × context token): the KV cache read and written by a one-token step. */
  decodeAttnMsPerRowToken: number;
  /** The same when the backend keeps the KV cache itself (engine steps with `openKvCache`): what unoffloaded runs pay. */
  ownedDecodeAttnMsPerRowToken?: number;
  /** Prefill attention cost per (row × prompt token²). */
  prefillAttnMsPerRowToken2: number;
  /** Output head (final LN + vocab projection) at `headRows`. */
  headRows: number[];
  headMs: Measured[];
  /** Token + position embedding per row. */
  embedMsPerRow: number;
  /** One request to the backend's worker (a tiny call): paid per layer call, per micro-batch and per step. */
  roundTripMs: Measured;
}

/** The model dimensions a layer profile was taken at. */
export interface ShapeKey {
  hiddenSize: number;
  ffnDim: number;
  numHeads: number;
  vocabSize: number;
  wordEmbedProjDim?: number;
}

export interface ShapeProfile {
  shape: ShapeKey;
  /** Keyed by backend name: 'onnxruntime-fp32' always, 'onednn-bf16' where oneDNN is usable. */
  backends: Record<string, BackendProfile>;
}

/** Speeds of the host and disk tiers and what the machine has free. */
export interface HostProfile {
  /** TypedArray slice/set copy bandwidth (GB/s): the micro-batch KV copies. */
  copyGBs: Measured;
  /** f16 → f32 conversion (G elements/s): each host- or disk-tier fp16 tensor per streamed layer load. */
  f16ToF32Gps: Measured;
  /** 4-bit dequantisation (G elements/s) for --compress-weight. */
  dequant4Gps: Measured;
  /** O_DIRECT reads and writes in the offload folder (GB/s); undefined when no offload folder was usable. */
  diskReadGBs?: Measured;
  diskWriteGBs?: Measured;
  offloadDir?: string;
  freeRamBytes: number;
  freeDiskBytes?: number;
  /** Resident memory of a process that has loaded the engine with a tiny model: the fixed cost of every run. */
  baseRssBytes: number;
}

export interface MachineProfile {
  key: MachineKey;
  createdAt: string;
  quick: boolean;
  /** Milliseconds the profile took. */
  tookMs: number;
  host: HostProfile;
  /** Keyed by `shapeId(shape)`. */
  shapes: Record<string, ShapeProfile>;
}

export const shapeId = (s: ShapeKey): string => `h${s.hiddenSize}-f${s.ffnDim}-n${s.numHeads}-v${s.vocabSize}${s.wordEmbedProjDim && s.wordEmbedProjDim !== s.hiddenSize ? `-e${s.wordEmbedProjDim}` : ''}`;
