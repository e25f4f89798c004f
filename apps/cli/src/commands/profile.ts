import { existsSync } from 'node:fs';
import { resolve, join } from 'node:path';
import { resolveDataDir } from '@flexhelm/downloads';
import { descriptionByName, readFolderModel, type ModelDescription } from '@flexhelm/engine';
import { describeGguf, isGgufPath } from '@flexhelm/gguf';
import { isModelFolder } from '@flexhelm/runner';
import { ensureProfile, loadProfile, shapeId, spreadOf, toShapeKey, type Measured, type MachineProfile } from '@flexhelm/policy-search';
import type { Command } from '../command.js';
import { modelFolderOption, PATH_ALIAS_DESCRIPTION } from '../option-values.js';

const fmt = (m: Measured, digits = 2) => `${m.median.toFixed(digits)} (±${(spreadOf(m) * 50).toFixed(0)}%)`;
const gib = (b: number) => `${(b / 1024 ** 3).toFixed(2)} GiB`;

/** The profile as a few readable lines: host and disk tiers, then per backend the layer costs at the model's shapes. */
function formatProfile(p: MachineProfile, m: ModelDescription): string[] {
  const h = p.host;
  const lines = [
    `machine: ${p.key.cpuModel}, ${p.key.cores} cores, ${gib(p.key.totalRamBytes)} RAM; ${Object.entries(p.key.backends).map(([k, v]) => `${k} ${v}`).join(', ')}`,
    `profiled ${p.createdAt}${p.quick ? ' (quick)' : ''} in ${(p.tookMs / 1000).toFixed(1)} s; medians (± half the spread)`,
    `memory copy ${fmt(h.copyGBs)} GB/s; f16→f32 ${fmt(h.f16ToF32Gps)} G elem/s; 4-bit dequant ${fmt(h.dequant4Gps)} G elem/s`,
    h.diskReadGBs ? `disk (O_DIRECT, ${h.offloadDir}): read ${fmt(h.diskReadGBs)} GB/s, write ${fmt(h.diskWriteGBs!)} GB/s, ${gib(h.freeDiskBytes ?? 0)} free` : 'disk: not probed (no usable offload folder)',
    ...(h.freshMsPerMB ? [`first touch of fresh memory ${fmt(h.freshMsPerMB)} ms per MB (paid per load by streamed tensors above 32 MiB)`] : []),
    `free RAM ${gib(h.freeRamBytes)}; engine floor (Node + onnxruntime worker) ${gib(h.baseRssBytes)}`,
  ];
  const shape = p.shapes[shapeId(toShapeKey(m))];
  for (const [name, b] of Object.entries(shape?.backends ?? {})) {
    lines.push(`${name} at ${m.name}'s shapes (${m.family} layer, hidden ${m.hiddenSize}, ffn ${m.mlp.intermediateSize}${m.attention.kvHeads !== m.attention.heads ? `, ${m.attention.kvHeads} KV heads` : ''}):`);
    lines.push(`  rows            ${b.rows.map((r) => String(r).padStart(8)).join('')}`);
    lines.push(`  layer ms        ${b.residentMs.map((m) => m.median.toFixed(2).padStart(8)).join('')}`);
    if (b.streamedMs) lines.push(`  streamed ms     ${b.streamedMs.map((m) => m.median.toFixed(2).padStart(8)).join('')}`);
    lines.push(`  linear GFLOP/s  ${b.linearGflops.map((g) => g.toFixed(1).padStart(8)).join('')}`);
    lines.push(
      `  attention: decode ${(b.decodeAttnMsPerRowToken * 1000).toFixed(2)} µs per row·token, prefill ${(b.prefillAttnMsPerRowToken2 * 1e6).toFixed(2)} ns per row·token²; ` +
        `head ${b.headMs.map((m, i) => `${m.median.toFixed(1)} ms @${b.headRows[i]}`).join(', ')}; worker round trip ${fmt(b.roundTripMs, 3)} ms` +
        `${b.setWeightsMs ? `; weight hand-over ${fmt(b.setWeightsMs, 1)} ms/layer` : ''}`,
    );
    if (b.fit) {
      const scales = (o: object) => Object.entries(o).map(([k, v]) => `${k} ${(v as number).toFixed(2)}`).join(', ');
      lines.push(
        `  cost model fitted to ${b.fit.runs.length} calibration runs (${b.fit.runs[0]?.layers ?? 0} layers; rms error time ${(100 * b.fit.rmsLogError.time).toFixed(0)}%, memory ${(100 * b.fit.rmsLogError.memory).toFixed(0)}%):`,
        `    time scales: ${scales(b.fit.time)}`,
        `    memory scales: ${scales(b.fit.memory)}`,
      );
    }
    const d = b.decode;
    if (d) {
      const row = (xs: Measured[]) => xs.map((m) => m.median.toFixed(2).padStart(8)).join('');
      lines.push(`  decode steps through the engine (context ${d.context.toFixed(0)}), per layer:`);
      lines.push(`    rows          ${d.rows.map((r) => String(r).padStart(8)).join('')}`);
      lines.push(`    resident ms   ${row(d.directLayerMs)}`);
      if (d.streamedLayerMs) lines.push(`    streamed ms   ${row(d.streamedLayerMs)}`);
      lines.push(`    logits ms     ${row(d.logitsMs)}   (+ ${d.sampleMsPerRow.toFixed(2)} ms per row for argmax and log-sum-exp)`);
      lines.push(
        `    per row·token of context: resident ${(d.directMsPerRowToken * 1000).toFixed(2)} µs` +
          `${d.streamedMsPerRowToken !== undefined ? `, streamed ${(d.streamedMsPerRowToken * 1000).toFixed(2)} µs` : ''}` +
          `${d.microBatchMsPerByte !== undefined ? `; each further micro-batch ${(d.microBatchMsPerByte * 1e6).toFixed(2)} ms per MB it copies` : ''}`,
      );
    }
  }
  return lines;
}

/** `flexhelm profile`: measures this machine for the cost model and caches the result under the data dir. */
export const profileCommand: Command = {
  name: 'profile',
  summary: 'Measure this machine for the policy optimizer (compute, copy, conversion and disk speeds) and cache it',
  options: {
    model: { type: 'string', valueName: 'M', description: 'the model whose layer shapes are timed: an OPT size (e.g. opt-1.3b; default opt-125m) or a model folder of any family' },
    path: { type: 'string', valueName: 'DIR', description: PATH_ALIAS_DESCRIPTION },
    'offload-dir': { type: 'string', valueName: 'DIR', description: 'folder whose disk the disk tier uses (default <data-dir>/offload)' },
    'data-dir': { type: 'string', valueName: 'DIR', description: 'where the profile is cached (default $FLEXHELM_DATA_DIR or ~/.cache/flexhelm)' },
    quick: { type: 'boolean', description: 'fewer sizes and repeats: minutes, not seconds (opt-125m: 3.3 min on a 2-vCPU VM; a 2-layer test model: under a minute); what `flexhelm run --percent auto` takes on first use' },
    refresh: { type: 'boolean', description: 'measure again even if a cached profile covers this machine and model' },
    json: { type: 'boolean', description: 'print the profile as JSON' },
  },
  details: [
    'Every figure is the median of repeated measurements, with its spread. The profile is cached per machine (CPU model',
    'and flags, cores, RAM, onnxruntime/oneDNN/addon versions): a change of any of them measures again. `flexhelm run',
    '--percent auto` (the default) reads it to predict each policy’s speed and memory.',
    '',
    'examples:',
    '  flexhelm profile --model opt-1.3b --offload-dir /mnt/nvme/offload',
    '  flexhelm profile --path models/opt-125m-random --quick --json',
  ].join('\n'),
  async run({ options, stdout, stderr, usageError }) {
    if (options.model !== undefined && options.path !== undefined) throw usageError('give --model or --path, not both');
    // A folder (written as a path, or one that exists here) is profiled at its own shapes; otherwise --model is a built-in name (an OPT size).
    const folder = options.path ?? (options.model !== undefined && isModelFolder(String(options.model)) ? options.model : undefined);
    // A GGUF file is profiled at the shapes its header states (no conversion needed for that).
    if (options.model !== undefined && isGgufPath(String(options.model)) && !existsSync(String(options.model))) throw usageError(`--model ${options.model}: no such file`);
    const gguf = folder !== undefined && isGgufPath(String(folder)) && existsSync(String(folder)) ? String(folder) : undefined;
    const dir = folder === undefined || gguf ? undefined : resolve(modelFolderOption(options, ''));
    let config: ModelDescription;
    try {
      if (gguf) config = describeGguf(gguf);
      // A folder of any family is profiled with its own layer (as `--percent auto` does), read through its family entry.
      else if (dir !== undefined) config = readFolderModel(dir);
      else config = descriptionByName(String(options.model ?? 'opt-125m').replace(/^facebook\//, ''));
    } catch (err) {
      throw usageError((err as Error).message);
    }
    const dataDir = resolveDataDir({ dataDir: options['data-dir'] as string | undefined });
    // --json shows what is cached, as it is: measuring (minutes) is what --refresh, or a profile not yet taken, asks for.
    const cached = options.json && !options.refresh ? loadProfile(dataDir) : undefined;
    if (cached) {
      const covered = cached.shapes[shapeId(toShapeKey(config))] !== undefined;
      stderr.write(`profile: cached (pass --refresh to measure again${covered ? '' : `; it has no figures for ${config.name}'s shapes yet: \`flexhelm profile\` without --json measures them`})\n`);
      stdout.write(`${JSON.stringify(cached, null, 2)}\n`);
      return;
    }
    const offloadDir = resolve((options['offload-dir'] as string | undefined) ?? join(dataDir, 'offload'));
    const { profile, measured } = await ensureProfile(config, {
      dataDir, offloadDir, quick: Boolean(options.quick), refresh: Boolean(options.refresh), log: (line) => stderr.write(`${line}\n`),
    });
    if (!measured) stderr.write('profile: cached (pass --refresh to measure again)\n');
    if (options.json) stdout.write(`${JSON.stringify(profile, null, 2)}\n`);
    else stdout.write(`${formatProfile(profile, config).join('\n')}\n`);
  },
};
