/**
 * A minimal protobuf writer for ONNX ModelProto (just the fields our graphs use; field numbers from onnx.proto).
 * Sub-messages keep their parts, so large raw tensors are copied only once, by `encodeModel`.
 */
class ProtoWriter {
  readonly parts: Uint8Array[] = [];
  length = 0;

  private push(bytes: Uint8Array): void {
    this.parts.push(bytes);
    this.length += bytes.length;
  }

  private varintBytes(value: number | bigint): Uint8Array {
    let v = BigInt.asUintN(64, BigInt(value));
    const out: number[] = [];
    while (v >= 0x80n) {
      out.push(Number(v & 0x7fn) | 0x80);
      v >>= 7n;
    }
    out.push(Number(v));
    return Uint8Array.from(out);
  }

  private tag(field: number, wireType: number): void {
    this.push(this.varintBytes((field << 3) | wireType));
  }

  varint(field: number, value: number | bigint): this {
    this.tag(field, 0);
    this.push(this.varintBytes(value));
    return this;
  }

  float(field: number, value: number): this {
    this.tag(field, 5);
    const b = new Uint8Array(4);
    new DataView(b.buffer).setFloat32(0, value, true);
    this.push(b);
    return this;
  }

  bytes(field: number, data: Uint8Array): this {
    this.tag(field, 2);
    this.push(this.varintBytes(data.length));
    if (data.length) this.push(data);
    return this;
  }

  string(field: number, text: string): this {
    return this.bytes(field, new TextEncoder().encode(text));
  }

  message(field: number, sub: ProtoWriter): this {
    this.tag(field, 2);
    this.push(this.varintBytes(sub.length));
    for (const p of sub.parts) this.push(p);
    return this;
  }

  finish(): Uint8Array {
    const out = new Uint8Array(this.length);
    let at = 0;
    for (const p of this.parts) {
      out.set(p, at);
      at += p.length;
    }
    return out;
  }
}

/** ONNX TensorProto.DataType values used here. */
/** ai.onnx opset of every graph here (LayerNormalization needs 17). */
export const OPSET = 17;

export const OnnxType = { FLOAT: 1, INT32: 6, INT64: 7, BOOL: 9, FLOAT16: 10 } as const;
type OnnxTypeCode = (typeof OnnxType)[keyof typeof OnnxType];

export type AttributeValue = number | string | number[] | { floats: number[] } | { float: number };

export interface OnnxNode {
  op: string;
  inputs: string[];
  outputs: string[];
  domain?: string;
  attributes?: Record<string, AttributeValue>;
}

export interface OnnxTensor {
  name: string;
  type: OnnxTypeCode;
  dims: number[];
  /** Little-endian raw bytes of the values (empty when `external` is set). */
  raw: Uint8Array;
  /** The values live in a side file (ONNX external data), at this byte range. */
  external?: { location: string; offset: number; length: number };
}

/** A graph input/output: a tensor type with dims that are numbers or symbolic names. */
export interface OnnxValueInfo {
  name: string;
  type: OnnxTypeCode;
  dims: (number | string)[];
}

export interface OnnxModel {
  graphName: string;
  nodes: OnnxNode[];
  initializers: OnnxTensor[];
  inputs: OnnxValueInfo[];
  outputs: OnnxValueInfo[];
  /** ai.onnx opset version. */
  opset: number;
  /** Also import com.microsoft v1. */
  microsoft?: boolean;
  irVersion?: number;
}

function attribute(name: string, value: AttributeValue): ProtoWriter {
  const a = new ProtoWriter().string(1, name);
  if (typeof value === 'number') {
    if (!Number.isInteger(value)) throw new Error(`attribute ${name}: use {float: x} for float attributes`);
    a.varint(3, value).varint(20, 2);
  } else if (typeof value === 'string') a.string(4, value).varint(20, 3);
  else if (Array.isArray(value)) {
    for (const v of value) a.varint(8, v);
    a.varint(20, 7);
  } else if ('floats' in value) {
    for (const v of value.floats) a.float(7, v);
    a.varint(20, 6);
  } else a.float(2, value.float).varint(20, 1);
  return a;
}

function tensor(t: OnnxTensor): ProtoWriter {
  const w = new ProtoWriter();
  for (const d of t.dims) w.varint(1, d);
  w.varint(2, t.type).string(8, t.name);
  if (!t.external) return w.bytes(9, t.raw);
  const entry = (k: string, v: string) => new ProtoWriter().string(1, k).string(2, v);
  w.message(13, entry('location', t.external.location));
  w.message(13, entry('offset', String(t.external.offset)));
  w.message(13, entry('length', String(t.external.length)));
  return w.varint(14, 1);
}

function valueInfo(v: OnnxValueInfo): ProtoWriter {
  const shape = new ProtoWriter();
  for (const d of v.dims) shape.message(1, typeof d === 'number' ? new ProtoWriter().varint(1, d) : new ProtoWriter().string(2, d));
  const tensorType = new ProtoWriter().varint(1, v.type).message(2, shape);
  return new ProtoWriter().string(1, v.name).message(2, new ProtoWriter().message(1, tensorType));
}

/** Serialises a model to ModelProto bytes that onnxruntime can load. */
export function encodeModel(model: OnnxModel): Uint8Array {
  const graph = new ProtoWriter();
  model.nodes.forEach((n, i) => {
    const w = new ProtoWriter();
    for (const x of n.inputs) w.string(1, x);
    for (const y of n.outputs) w.string(2, y);
    w.string(3, `${n.op}_${i}`).string(4, n.op);
    for (const [k, v] of Object.entries(n.attributes ?? {})) w.message(5, attribute(k, v));
    if (n.domain) w.string(7, n.domain);
    graph.message(1, w);
  });
  graph.string(2, model.graphName);
  for (const t of model.initializers) graph.message(5, tensor(t));
  for (const v of model.inputs) graph.message(11, valueInfo(v));
  for (const v of model.outputs) graph.message(12, valueInfo(v));
  const m = new ProtoWriter().varint(1, model.irVersion ?? 8).string(2, 'flexhelm');
  m.message(7, graph);
  m.message(8, new ProtoWriter().string(1, '').varint(2, model.opset));
  if (model.microsoft) m.message(8, new ProtoWriter().string(1, 'com.microsoft').varint(2, 1));
  return m.finish();
}

/** Raw little-endian bytes of a typed array (a view, no copy). */
function rawBytes(a: Float32Array | BigInt64Array | Int32Array | Uint16Array): Uint8Array {
  return new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
}

/** Receives large initializers as they are added, returning where they were stored (ONNX external data). */
export interface ExternalDataSink {
  location: string;
  /** Smaller tensors stay inside the model. */
  threshold: number;
  /** Appends the bytes and returns their offset in the side file. */
  append(raw: Uint8Array): number;
}

/** Small helper to build node lists with unique intermediate names. */
export class GraphBuilder {
  readonly nodes: OnnxNode[] = [];
  readonly initializers: OnnxTensor[] = [];
  private readonly names = new Set<string>();
  private counter = 0;

  constructor(private readonly external?: ExternalDataSink) {}

  /** Adds an initializer once per name (shared constants may be requested by several layers). */
  private addInitializer(t: OnnxTensor): string {
    if (this.names.has(t.name)) return t.name;
    this.names.add(t.name);
    if (this.external && t.raw.length >= this.external.threshold) {
      const offset = this.external.append(t.raw);
      this.initializers.push({ ...t, raw: new Uint8Array(0), external: { location: this.external.location, offset, length: t.raw.length } });
    } else this.initializers.push(t);
    return t.name;
  }

  /** Adds a node and returns its (single) output name. */
  op(op: string, inputs: string[], attributes?: Record<string, AttributeValue>, output?: string): string {
    const out = output ?? `${op.toLowerCase()}_${this.counter++}`;
    this.nodes.push({ op, inputs, outputs: [out], attributes });
    return out;
  }

  /** Adds a node with several outputs. */
  multi(op: string, inputs: string[], outputs: string[], attributes?: Record<string, AttributeValue>): string[] {
    this.nodes.push({ op, inputs, outputs, attributes });
    return outputs;
  }

  constInt64(name: string, values: number[], dims: number[] = [values.length]): string {
    return this.addInitializer({ name, type: OnnxType.INT64, dims, raw: rawBytes(BigInt64Array.from(values.map(BigInt))) });
  }

  constFloat(name: string, values: number[], dims: number[] = [values.length]): string {
    return this.addInitializer({ name, type: OnnxType.FLOAT, dims, raw: rawBytes(Float32Array.from(values)) });
  }

  floatTensor(name: string, data: Float32Array, dims: number[]): string {
    return this.addInitializer({ name, type: OnnxType.FLOAT, dims, raw: rawBytes(data) });
  }
}
