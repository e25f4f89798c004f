import { existsSync, readdirSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { formatMetricTable, headlineMetrics, readRunSpec, readStats, runIsComplete, writeFileAtomic, type MetricRow } from '@flexhelm/runner';
import type { Command } from '../command.js';

interface RunSummary {
  run: string;
  model: string;
  scenario: string;
  metrics: MetricRow[];
}

/**
 * `flexhelm summarize --suite S`: one table over every complete run of a suite. It writes its own files
 * (`flexhelm_summary.json`, `flexhelm_summary.md`) beside the runs, so HELM's `helm-summarize` can still be run on
 * the same folder and write its `summary.json`, `runs.json`, … untouched.
 */
export const summarizeCommand: Command = {
  name: 'summarize',
  summary: 'Summarise every run of a suite into one JSON file and one markdown table',
  options: {
    suite: { type: 'string', valueName: 'S', description: 'the suite to summarise (runs/<suite>/…)' },
    'output-path': { type: 'string', short: 'o', valueName: 'DIR', description: 'HELM output folder (default benchmark_output)' },
  },
  details: [
    'Reads run_spec.json and stats.json of every run directory of the suite that has all five files, and writes',
    '<output-path>/runs/<suite>/flexhelm_summary.json (runs, models, headline metrics) and flexhelm_summary.md',
    '(one table per run); the markdown is also printed. Incomplete run directories are listed and skipped.',
  ].join('\n'),
  run({ options, stdout, stderr, usageError }) {
    const suite = options.suite as string | undefined;
    if (!suite) throw usageError('give --suite S');
    const suiteDir = join(resolve((options['output-path'] as string | undefined) ?? 'benchmark_output'), 'runs', suite);
    if (!existsSync(suiteDir)) throw usageError(`no suite folder ${suiteDir}; run \`flexhelm run --suite ${suite} …\` first or pass --output-path`);
    const summaries: RunSummary[] = [];
    for (const name of readdirSync(suiteDir).sort()) {
      const dir = join(suiteDir, name);
      if (!statSync(dir).isDirectory() || name === 'eval_cache') continue;
      if (!runIsComplete(dir)) {
        stderr.write(`skipping ${dir}: not all five files are there (an unfinished run?)\n`);
        continue;
      }
      const runSpec = readRunSpec(dir);
      summaries.push({
        run: runSpec.name,
        model: runSpec.adapter_spec.model,
        scenario: runSpec.scenario_spec.class_name.split('.').pop() ?? runSpec.scenario_spec.class_name,
        metrics: headlineMetrics(readStats(dir)),
      });
    }
    if (summaries.length === 0) throw usageError(`${suiteDir} holds no complete runs`);
    const markdown = summaries
      .map((s) => `## ${s.run}\n\nmodel \`${s.model}\`, scenario \`${s.scenario}\`\n\n${formatMetricTable(s.metrics, true)}`)
      .join('\n');
    writeFileAtomic(join(suiteDir, 'flexhelm_summary.json'), `${JSON.stringify({ suite, runs: summaries }, null, 2)}\n`);
    writeFileAtomic(join(suiteDir, 'flexhelm_summary.md'), `# Suite ${suite}\n\n${markdown}`);
    stdout.write(`# Suite ${suite}\n\n${markdown}`);
    stderr.write(`wrote ${join(suiteDir, 'flexhelm_summary.json')} and flexhelm_summary.md (${summaries.length} runs)\n`);
  },
};
