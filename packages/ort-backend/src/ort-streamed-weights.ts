import type { HeadWeights } from '@flexhelm/engine';
import { layerTensorsOf, type LayerTensors, type ModelDescription, type StreamedHead, type StreamedLayers } from '@flexhelm/contract';
import type { OrtGraphs } from './ort-family-graphs.js';
import { type OrtWorkerClient, transferable } from './ort-worker-client.js';

/** What the streamed weights need of their backend: the worker, the model and its family's graphs, session creation. */
export interface OrtSessionHost {
  readonly worker: OrtWorkerClient;
  readonly model: ModelDescription;
  readonly graphs: OrtGraphs;
  create(key: string, model: Uint8Array): Promise<void>;
}

/**
 * Streamed (offloaded) layers and head on the onnxruntime worker: one session whose weights are graph inputs (the
 * family's streamed layer and head graphs, `OrtGraphs`), fed from worker-held shared tensors — resident ones (`L<i>.`, `H.`)
 * set once, streamed ones (`S.`, `SH.`) replaced before each use. The arrays are transferred, so none is reclaimed.
 */
export class OrtStreamedWeights implements StreamedLayers {
  /** Streamed layers: feed name → shared tensor name in the worker. */
  private readonly layers = new Map<number, Record<string, string>>();
  /** The streamed layer sessions created (`OrtGraphs.streamedLayerKey`). */
  private readonly sessions = new Set<string>();
  /** Streamed head: feed name → shared tensor name of its resident tensors, and the tensors for the next head call. */
  private headNames?: { resident: Record<string, string>; names: Record<string, string> };
  /** Worker tensors of the streamed layer weights set last (`S.` names). */
  private readonly layerNames = new Set<string>();

  constructor(private readonly host: OrtSessionHost) {}

  /** The session that computes streamed layer `index`. */
  sessionKey(index: number): string {
    return this.host.graphs.streamedLayerKey(index);
  }

  /** The feeds of streamed layer `index` (undefined for a resident layer). */
  sharedAs(index: number): Record<string, string> | undefined {
    return this.layers.get(index);
  }

  async loadLayer(index: number, resident: Partial<LayerTensors>): Promise<void> {
    const session = this.sessionKey(index);
    if (!this.sessions.has(session)) {
      await this.host.create(session, this.host.graphs.streamedLayer(index));
      this.sessions.add(session);
    }
    await this.host.worker.request({ kind: 'release', key: `layer${index}.qkv` });
    await this.host.worker.request({ kind: 'release', key: `layer${index}.rest` });
    this.layers.set(index, await this.setLayerTensors(index, `L${index}.`, resident));
  }

  async setLayer(index: number, weights: Partial<LayerTensors>): Promise<void> {
    const resident = this.layers.get(index);
    if (!resident) throw new Error(`OrtBackend: layer ${index} is not a streamed layer (call streamedLayers.loadLayer first)`);
    // The same names for every layer: the worker drops the previous layer's streamed tensors as these replace them,
    // and the streamed head's are freed (the next head call sets them again).
    const head = this.headNames;
    if (head && Object.keys(head.names).length > Object.keys(head.resident).length) {
      await this.dropShared(Object.values(head.names).filter((n) => n.startsWith('SH.')));
      head.names = { ...head.resident };
    }
    const names = await this.setLayerTensors(index, 'S.', weights);
    for (const n of Object.values(names)) this.layerNames.add(n);
    this.layers.set(index, { ...Object.fromEntries(Object.entries(resident).filter(([, v]) => v.startsWith('L'))), ...names });
  }

  reclaim(): Float32Array[] {
    return [];
  }

  readonly head: StreamedHead = {
    // The family's streamed head graph: `resident` tensors stay in the worker, the others come with `set`.
    load: async (resident) => {
      await this.host.create('head', this.host.graphs.streamedHead());
      const names = await this.setHeadTensors('H.', resident);
      this.headNames = { resident: names, names: { ...names } };
    },
    // The last streamed layer's tensors are freed first (the head comes after every layer; `setLayer` does the same
    // for the head's), so the worker holds one streamed unit at a time, not two.
    set: async (weights) => {
      const head = this.headNames;
      if (!head) throw new Error('OrtBackend: the head is not a streamed head (call streamedHead.load first)');
      await this.dropShared(this.layerNames);
      this.layerNames.clear();
      head.names = { ...head.resident, ...(await this.setHeadTensors('SH.', weights)) };
    },
  };

  /** The head reads resident weights again (`loadHead`). */
  residentHead(): void {
    this.headNames = undefined;
  }

  /** The feeds of a streamed head, checked complete; undefined for a resident head. */
  headFeeds(): Record<string, string> | undefined {
    const streamed = this.headNames;
    if (!streamed) return undefined;
    for (const { key, input } of this.host.graphs.headInputs()) {
      if (!streamed.names[input]) throw new Error(`OrtBackend: the streamed head's ${key} is neither resident nor set (call streamedHead.set before head)`);
    }
    return streamed.names;
  }

  private async setLayerTensors(index: number, prefix: string, tensors: Partial<LayerTensors>): Promise<Record<string, string>> {
    const names: Record<string, string> = {};
    for (const { key, shape } of layerTensorsOf(this.host.model, index)) {
      const data = tensors[key];
      if (!data) continue;
      const input = this.host.graphs.layerInput(key);
      const name = `${prefix}${input}`;
      await this.host.worker.request({ kind: 'setShared', name, tensor: { type: 'float32', data, dims: shape } }, transferable(data));
      names[input] = name;
    }
    return names;
  }

  private async setHeadTensors(prefix: string, tensors: Partial<HeadWeights>): Promise<Record<string, string>> {
    const names: Record<string, string> = {};
    for (const { key, input, dims } of this.host.graphs.headInputs()) {
      const data = tensors[key];
      if (!data) continue;
      await this.host.worker.request({ kind: 'setShared', name: `${prefix}${input}`, tensor: { type: 'float32', data, dims } }, transferable(data));
      names[input] = `${prefix}${input}`;
    }
    return names;
  }

  /** Replaces worker tensors `names` with empty ones, so their memory is freed now rather than at their next use. */
  private async dropShared(names: Iterable<string>): Promise<void> {
    for (const name of names) await this.host.worker.request({ kind: 'setShared', name, tensor: { type: 'float32', data: new Float32Array(0), dims: [0] } });
  }
}
