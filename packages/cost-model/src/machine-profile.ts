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
  /**
   * The vocabulary the head and logits were timed at, when smaller than the shape's (a large token table is not
   * allocated to profile; head, logits and sampling costs are scaled linearly to the shape's vocabulary).
   */
  profileVocab?: number;
  headMs: Measured[];
  /** Token + position embedding per row. */
  embedMsPerRow: number;
  /** One request to the backend's worker (a tiny call): paid per layer call, per micro-batch and per step. */
  roundTripMs: Measured;
  /** Decode steps timed through the engine itself (absent in profiles taken before it existed: the terms above then). */
  decode?: DecodeProbe;
  /** Scale factors of the cost model fitted to short real runs of the model's shape (absent: every scale 1). */
  fit?: CostFit;
}

/**
 * Per-term scale factors of the time model (FlexLLMGen fits its constants to measured runs the same way): what parts
 * timed alone miss — this VM's first touches of fresh memory, the worker's scheduling, two cores shared by the
 * conversions and the compute — is absorbed per term rather than modelled bottom-up.
 */
export interface TimeScales {
  /** All-resident steps (prefill, decode). */
  directPrefill: number;
  directDecode: number;
  /** Loading a streamed layer or head (conversions, disk read, first touches). */
  load: number;
  /** Computing a streamed layer's micro-batches (prefill, decode). */
  prefillCompute: number;
  decodeCompute: number;
  /** Loading a streamed output head (one 100+ MB table into fresh memory each step, unlike a layer's tensors). */
  headLoad: number;
  /**
   * Share of a streamed layer's smaller tensors (≤ 32 MiB, from glibc's heap) whose fp32 form is first-touched memory
   * after all (0: warm, 1: every load fresh): the same per byte for f16 and 4-bit weights, unlike their conversion.
   */
  freshLoad: number;
  /** Share of the shorter of a layer's load and compute that does not overlap (0: FlexLLMGen's max, 1: their sum). */
  contention: number;
}

/** Scale factors of the peak-RSS terms (see `predictPeakRss`). */
export interface MemoryScales {
  /** fp32 weights on the compute tier and what their loading leaves behind. */
  resident: number;
  /** f16 / 4-bit copies on the host tier. */
  host: number;
  /** fp32 forms of streamed host-tier tensors (layers and head) in flight. */
  streamed: number;
  /** The same for disk-tier tensors, with the disk files' images. */
  disk: number;
  /** Activations and the schedule's workspace. */
  workspace: number;
  /** The KV cache. */
  kv: number;
  /** All-resident runs: onnxruntime's arena for the whole stack's prefill activations (one session runs every layer). */
  stack: number;
  /** The loading phase's peak (weights' homes, fp32 tables and layers in flight), which short runs reach before the run's. */
  loading: number;
}

/** One calibration run: the policy, the workload and what was measured. */
export interface CalibrationRun {
  policy: { wg: number; wc: number; gbs: number; ngb: number; compress: boolean };
  layers: number;
  promptLen: number;
  genLen: number;
  prefillMs: number;
  decodeStepMs: number;
  peakRssBytes: number;
}

export interface CostFit {
  time: TimeScales;
  memory: MemoryScales;
  /** The runs fitted to (kept so the fit can be redone when the host figures change). */
  runs: CalibrationRun[];
  /** Root-mean-square of ln(predicted / measured) over the runs after the fit: time (prefill and decode) and memory. */
  rmsLogError: { time: number; memory: number };
}

/**
 * Decode steps of a two-layer dummy model timed through the engine as a run drives it (step, logits, argmax and
 * log-sum-exp per row): what a step costs besides its GEMMs — worker round trips, the KV cache's append and transfers,
 * the weights hand-over, small GEMMs far below the prefill rate, and this kind of VM's first touches of fresh memory —
 * measured in place rather than summed from parts timed alone (which ran warm and predicted decode about 2× too fast).
 */
export interface DecodeProbe {
  /** Batch rows probed, ascending. */
  rows: number[];
  /** Context (cached tokens + 1) of the short-context steps. */
  context: number;
  /** Per decoder layer, all weights resident, the backend holding the KV cache (unoffloaded runs), short context. */
  directLayerMs: Measured[];
  /** A streamed layer's weights hand-over timed inside the streamed steps (once per layer, whatever the micro-batches). */
  handOverMs?: Measured;
  /** Rows of the streamed figures (default `rows`). */
  streamedRows?: number[];
  /** Per decoder layer of OffloadingBackend with the weights streamed from the host tier (one micro-batch of `rows`), waits for loads excluded; absent for backends that cannot stream. */
  streamedLayerMs?: Measured[];
  /** Added per layer per (row × context token) beyond `context`: attention over the cache and the cache's moves. */
  directMsPerRowToken: number;
  streamedMsPerRowToken?: number;
  /** Each further micro-batch of a layer beyond its layer call (setStep, the row slices in and the results out), per byte those copies move. */
  microBatchMsPerByte?: number;
  /** `run.logits` for `rows` rows after a step: hidden picking, the head, the logits back in this thread. */
  logitsMs: Measured[];
  /** The same through OffloadingBackend with the weights on the host tier (a streamed head handed over each step, its load's wait excluded). */
  streamedLogitsMs?: Measured[];
  /** argmax and log-sum-exp over the vocabulary, per row (what generation does with each row's logits). */
  sampleMsPerRow: number;
}

/** The model dimensions a layer profile was taken at. */
export interface ShapeKey {
  hiddenSize: number;
  ffnDim: number;
  numHeads: number;
  vocabSize: number;
  wordEmbedProjDim?: number;
  /** Set for every family but OPT: what makes its decoder layer differ from OPT's of the same widths. */
  family?: FamilyLayerKey;
}

/** The layer structure of a non-OPT family that its timings depend on (RMSNorm, SwiGLU, grouped-query attention). */
export interface FamilyLayerKey {
  kvHeads: number;
  headDim: number;
  gatedMlp: boolean;
  norm: 'rmsnorm' | 'layernorm';
  /** q/k/v biases (Qwen2). */
  attentionBias: boolean;
  /**
   * The description's kinds beyond a Llama layer's (`FamilyShape.extraKinds`: soft-caps, (1 + w) norms, four norms a
   * layer, q/k norms, GeGLU, windows on even layers); absent in profiles of Llama, Mistral and Qwen2 (their ids stay).
   */
  kinds?: string[];
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
  /** First touch of freshly mapped memory (ms per MB, 64 MiB arrays: above glibc's mmap threshold, so new pages each time). */
  freshMsPerMB?: Measured;
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

export const shapeId = (s: ShapeKey): string =>
  `h${s.hiddenSize}-f${s.ffnDim}-n${s.numHeads}-v${s.vocabSize}${s.wordEmbedProjDim && s.wordEmbedProjDim !== s.hiddenSize ? `-e${s.wordEmbedProjDim}` : ''}${s.family ? familyId(s.family) : ''}`;

/** OPT's ids stay as they were (cached profiles keep their keys); a family layer adds its structure. */
const familyId = (f: FamilyLayerKey): string =>
  `-kv${f.kvHeads}x${f.headDim}${f.gatedMlp ? '-swiglu' : ''}${f.norm === 'rmsnorm' ? '-rms' : ''}${f.attentionBias ? '-qkvb' : ''}${(f.kinds ?? []).map((k) => `-${k.replace(':', '.')}`).join('')}`;
