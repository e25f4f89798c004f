import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { resolveDataDir } from '@flexhelm/downloads';
import { formatMetricTable, headlineMetrics, runIsComplete, writeFileAtomic } from '@flexhelm/runner';
import { loadHelmSchema, summarizeSuite } from '@flexhelm/summarize';
import { didYouMean } from '@flexhelm/session';
import type { Command } from '../command.js';
import { sideBySideTables } from '../side-by-side-table.js';
import { InputError } from '../usage-error.js';

/**
 * `flexhelm summarize --suite S`: what HELM 0.2.1's `helm-summarize --suite S` writes (the suite's summary files,
 * leaderboard tables per scenario group, each run's display files), then flexhelm's own one-table-per-run markdown
 * on stdout (also kept as `flexhelm_summary.{json,md}`, which HELM's tools pass over).
 */
export const summarizeCommand: Command = {
  name: 'summarize',
  summary: "Write HELM's summary files of a suite (helm-summarize): leaderboards per scenario group, run display files",
  options: {
    suite: { type: 'string', valueName: 'S', description: 'the suite to summarise (runs/<suite>/…)' },
    'output-path': { type: 'string', short: 'o', valueName: 'DIR', description: 'HELM output folder (default benchmark_output)' },
    'skip-write-run-display-json': { type: 'boolean', description: "do not write each run's instances.json, display_predictions.json, display_requests.json" },
    debug: { type: 'boolean', description: 'list the run specs each table cell aggregates in its description (HELM --debug)' },
    'data-dir': { type: 'string', valueName: 'DIR', description: "where HELM's schema.yaml is downloaded to (default $FLEXHELM_DATA_DIR or ~/.cache/flexhelm)" },
    offline: { type: 'boolean', description: "never download HELM's schema.yaml" },
  },
  details: [
    "Writes into <output-path>/runs/<suite>/ what HELM 0.2.1's helm-summarize writes, byte for byte: summary.json, runs.json,",
    'run_specs.json, groups.json, groups_metadata.json, groups/<group>.json with groups/json/ and groups/latex/, costs.json,',
    "and in each run folder instances.json, display_predictions.json and display_requests.json. HELM's schema.yaml (scenario",
    'groups, metric groups, display names) is read from $FLEXHELM_HELM_SOURCE_DIR (a HELM v0.2.1 checkout) or downloaded',
    'once, pinned by SHA-256. Run folders without run_spec.json or stats.json are skipped with a warning, as HELM does;',
    'so are symlinks to run folders outside the output folder. A corrupt file stops the command with its name, and no',
    'summary file is replaced. Then prints one metric table per complete run (also written to flexhelm_summary.md/.json).',
  ].join('\n'),
  async run({ options, stdout, stderr, usageError }) {
    const suite = options.suite as string | undefined;
    if (!suite) throw usageError('give --suite S');
    // Kept as typed: HELM writes this path into runs.json and the tables' links.
    const outputPath = (options['output-path'] as string | undefined) ?? 'benchmark_output';
    // Local things first: a suite that is not there is said before any download is tried.
    const suiteDir = join(outputPath, 'runs', suite);
    if (!existsSync(suiteDir)) {
      const runsDir = join(outputPath, 'runs');
      const suites = existsSync(runsDir) ? readdirSync(runsDir, { withFileTypes: true }).filter((d) => d.isDirectory()).map((d) => d.name) : [];
      const known = suites.length ? `; suites there: ${suites.slice(0, 10).join(', ')}${didYouMean(suite, suites)}` : `; \`flexhelm run --suite ${suite} --output-path ${outputPath} …\` writes one`;
      throw new InputError(`no suite ${suite}: ${suiteDir} does not exist${known}`);
    }
    const schema = await loadHelmSchema({ dataDir: resolveDataDir({ dataDir: options['data-dir'] as string | undefined }), offline: Boolean(options.offline) });
    const result = summarizeSuite({
      outputPath,
      suite,
      schema,
      skipRunDisplayJson: Boolean(options['skip-write-run-display-json']),
      verbose: Boolean(options.debug),
      warn: (m) => stderr.write(`${m}\n`),
    });
    if (result.runs.length === 0) stderr.write(`${result.suiteDir} holds no runs; the summary files list none\n`);
    stderr.write(`wrote ${result.files.length} files for ${result.runs.length} runs into ${result.suiteDir}\n`);

    const complete = result.runs.filter((run) => runIsComplete(run.realDir));
    if (complete.length === 0) return;
    const summaries = complete.map((run) => ({
      run: run.runSpec.name,
      model: run.runSpec.adapter_spec.model,
      scenario: run.runSpec.scenario_spec.class_name.split('.').pop() ?? run.runSpec.scenario_spec.class_name,
      metrics: headlineMetrics(run.stats),
    }));
    // Runs of one description for several models first, a column per model; then each run's own table.
    const compared = sideBySideTables(summaries);
    const markdown = (compared ? [compared] : []).concat(summaries.map((s) => `## ${s.run}\n\nmodel \`${s.model}\`, scenario \`${s.scenario}\`\n\n${formatMetricTable(s.metrics, true)}`)).join('\n');
    writeFileAtomic(join(result.suiteDir, 'flexhelm_summary.json'), `${JSON.stringify({ suite, runs: summaries }, null, 2)}\n`);
    writeFileAtomic(join(result.suiteDir, 'flexhelm_summary.md'), `# Suite ${suite}\n\n${markdown}`);
    stdout.write(`# Suite ${suite}\n\n${markdown}`);
  },
};
