import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { positionTable, type EmbeddingWeights, type ModelDescription } from '@flexhelm/engine';
import { allocPinned, f16ToF32, f32ToF16, readFile, writeFile } from '@flexhelm/pinned-memory';
import { placeWeights, type Tier } from './placement.js';
import type { Policy } from './policy.js';

/** One embedding table's home: float32 rows (compute tier), f16 rows in pinned RAM (host) or an f16 file (disk). */
type TableHome = { tier: 'compute'; f32: Float32Array } | { tier: 'host'; f16: Uint16Array } | { tier: 'disk'; file: string };

/**
 * FlexLLMGen's InputEmbed layer object `[tok, pos]` (`[tok]` for rotary families) placed by the weight percents (spec §3.1) and computed where it
 * lives: the lookup gathers only the rows a step needs from the home copy (float32 on the compute tier, f16 on the
 * host tier, O_DIRECT row reads from an f16 file on disk), so the table is never held twice. The sum is done in
 * float32 exactly as onnxruntime's Gather + Add do, so a compute-tier embedding gives the same bits as the backend's.
 */
export class TieredEmbedding {
  /** `positions` is undefined for rotary families (no table). */
  readonly tiers: { tokens: Tier; positions?: Tier };
  readonly bytes: Record<Tier, number> = { compute: 0, host: 0, disk: 0 };
  private tokens!: TableHome;
  private positions?: TableHome;
  diskBytesRead = 0;

  constructor(
    private readonly model: ModelDescription,
    policy: Policy,
    private readonly dir: string | undefined,
    private readonly direct: boolean,
  ) {
    const E = model.hiddenSize;
    const p = model.positions;
    const tables = [{ name: 'tok', shape: [model.vocabSize, E] }];
    if (p.kind === 'learned') tables.push({ name: 'pos', shape: [model.maxPositions + p.offset, E] });
    const [tokens, positions] = placeWeights(tables, policy.wGpuPercent, policy.wCpuPercent);
    this.tiers = { tokens: tokens!, positions };
    if ((tokens === 'disk' || positions === 'disk') && !dir) throw new Error('the policy puts the input embedding on disk; pass an offload folder (--offload-dir)');
  }

  /** Whether either table lives off the compute tier (its lookups read host RAM or disk). */
  get offCompute(): boolean {
    return this.tiers.tokens !== 'compute' || this.tiers.positions !== 'compute';
  }

  /** Takes the float32 tables (the compute tier keeps the given arrays; the other tiers convert and drop them). */
  async load(w: EmbeddingWeights): Promise<void> {
    this.tokens = await this.home('tokens', w.tokens);
    if (this.tiers.positions) this.positions = await this.home('positions', positionTable(w));
  }

  private async home(name: 'tokens' | 'positions', table: Float32Array): Promise<TableHome> {
    const tier = this.tiers[name]!;
    if (tier === 'compute') {
      this.bytes.compute += table.byteLength;
      return { tier, f32: table };
    }
    const f16 = await f32ToF16(table, new Uint16Array(await allocPinned(table.length * 2)));
    if (tier === 'host') {
      this.bytes.host += f16.byteLength;
      return { tier, f16 };
    }
    mkdirSync(this.dir!, { recursive: true });
    const file = join(this.dir!, `embed-${name}.bin`);
    await writeFile(file, f16);
    this.bytes.disk += f16.byteLength;
    return { tier, file };
  }

  /** Rows `ids` of a table as float32 `[ids.length, hidden]`. */
  private async rows(home: TableHome, ids: Int32Array): Promise<Float32Array> {
    const E = this.model.hiddenSize;
    const out = new Float32Array(ids.length * E);
    if (home.tier === 'compute') {
      ids.forEach((id, i) => { out.set(home.f32.subarray(id * E, (id + 1) * E), i * E); });
      return out;
    }
    const f16 = new Uint16Array(ids.length * E);
    if (home.tier === 'host') ids.forEach((id, i) => { f16.set(home.f16.subarray(id * E, (id + 1) * E), i * E); });
    else {
      // One read per distinct row; repeated ids (padding, a repeated prompt) are read once.
      const distinct = [...new Set(ids)];
      const staging = new Uint16Array(await allocPinned(distinct.length * E * 2));
      await Promise.all(distinct.map((id, k) => readFile(home.file, staging.subarray(k * E, (k + 1) * E), { offset: id * E * 2, direct: this.direct })));
      this.diskBytesRead += distinct.length * E * 2;
      const at = new Map(distinct.map((id, k) => [id, k]));
      ids.forEach((id, i) => {
        const k = at.get(id)!;
        f16.set(staging.subarray(k * E, (k + 1) * E), i * E);
      });
    }
    return f16ToF32(f16, out);
  }

  /**
   * Token (+ learned position) embeddings: ids and positions `[batch * seq]` → hidden `[batch, seq, hidden]`; a
   * description's embedding scale (Gemma: sqrt(hidden)) multiplies the token rows, in float32 like the fp32 backends.
   */
  async embed(ids: Int32Array, positions: Int32Array): Promise<Float32Array> {
    if (!this.positions) return scaled(await this.rows(this.tokens, ids), this.model.embedding.scale);
    const [rows, pos] = await Promise.all([this.rows(this.tokens, ids), this.rows(this.positions, positions)]);
    const tok = scaled(rows, this.model.embedding.scale);
    for (let i = 0; i < tok.length; i++) tok[i] = tok[i]! + pos[i]!;
    return tok;
  }
}

/** `rows · scale` in place, the factor rounded to float32 (as `torch.tensor(sqrt(hidden), dtype=float32)`). */
function scaled(rows: Float32Array, scale: number | undefined): Float32Array {
  if (scale === undefined || scale === 1) return rows;
  const f = Math.fround(scale);
  for (let i = 0; i < rows.length; i++) rows[i] = rows[i]! * f;
  return rows;
}
