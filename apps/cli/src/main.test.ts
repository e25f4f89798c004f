import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { COMMANDS } from './commands/index.js';
import { runArgvInProcess } from './run-in-process.js';

// The tests run the built binary, as a user would (turbo builds before testing).
const main = fileURLToPath(new URL('../dist/main.js', import.meta.url));
const flexhelm = (...args: string[]) => {
  const r = spawnSync(process.execPath, [main, ...args], { encoding: 'utf8' });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
};
/** The same command line in this process (runCli, what main.js calls): for the loops over every command. */
const inProcess = (...args: string[]) => runArgvInProcess(args);

describe('flexhelm', () => {
  it('is built', () => expect(existsSync(main)).toBe(true));

  it('--help lists the commands; no command is a usage error', () => {
    const help = flexhelm('--help');
    expect(help.status).toBe(0);
    expect(help.stdout).toMatch(/^usage: flexhelm <command> \[options\]\n/);
    expect(help.stdout).toMatch(/\n {2}run-specs +Expand run entries/);
    const none = flexhelm();
    expect([none.status, none.stdout]).toEqual([2, '']);
    expect(none.stderr).toMatch(/^usage: flexhelm/);
  });

  it('--version prints the version of flexhelm and Node', () => {
    const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
    for (const flag of ['--version', '-V']) expect(flexhelm(flag)).toEqual({ status: 0, stdout: `flexhelm ${pkg.version} (Node ${process.versions.node})\n`, stderr: '' });
  });

  it('help <command> is <command> --help, for every command (serve: the server\'s own options)', async () => {
    for (const c of COMMANDS) {
      const help = await inProcess('help', c.name);
      expect(help.status, c.name).toBe(0);
      if (c.name === 'run' || c.name === 'serve') expect(help.stdout, c.name).toBe((await inProcess(c.name, '--help')).stdout);
      expect(help.stdout, c.name).toMatch(new RegExp(`^usage: flexhelm ${c.name} \\[options\\]`));
    }
    expect(flexhelm('help', 'serve').stdout).toMatch(/--max-stream-buffer N/);
    expect(flexhelm('help', 'sumarize').stderr).toMatch(/^flexhelm: unknown command 'sumarize' \(did you mean summarize\?\)/);
  });

  it('suggests the closest option of every command for a mistyped one (exit 2, one line and the help hint)', async () => {
    for (const c of COMMANDS) {
      const option = Object.keys(c.options).find((o) => o.length >= 6) ?? 'help';
      const typo = `--${option.slice(0, -1)}x`;
      const r = await inProcess(c.name, typo, 'v');
      expect(r.status, c.name).toBe(2);
      expect(r.stderr.split('\n')[0], c.name).toMatch(new RegExp(`^flexhelm ${c.name}: unknown option ${typo} \\(did you mean [^)]*--${option}\\b`));
    }
    const serve = flexhelm('serve', '--prot', '8000');
    expect([serve.status, serve.stderr]).toEqual([2, 'flexhelm serve: unknown option --prot (did you mean --port, --path, --host?)\nrun `flexhelm serve --help` for the options\n']);
  });

  it('gives every short flag one meaning across commands', () => {
    const meanings = new Map<string, Set<string>>();
    for (const c of COMMANDS) {
      for (const [name, o] of Object.entries(c.options)) if (o.short) meanings.set(o.short, (meanings.get(o.short) ?? new Set()).add(name));
    }
    // -o is where a command writes, whether a HELM output folder or a folder to create.
    const outputs = meanings.get('o');
    meanings.delete('o');
    expect([...(outputs ?? [])].sort()).toEqual(['out', 'output-path']);
    for (const [short, names] of meanings) expect([...names], `-${short}`).toHaveLength(1);
    expect(meanings.get('m')).toEqual(new Set(['max-eval-instances']));
  });

  it('says what is wrong in flexhelm\'s words: negative numbers, repeated options, missing folders, no internal names', async () => {
    const ram = await inProcess('run', '-d', 'synthetic_reasoning:mode=induction', '--max-ram', '-3');
    expect([ram.status, ram.stderr.split('\n')[0]]).toEqual([2, "flexhelm run: --max-ram must be a positive number of GiB (e.g. --max-ram 16), got '-3'"]);
    const serveRam = await inProcess('serve', '--max-ram', '-3');
    expect([serveRam.status, serveRam.stderr.split('\n')[0]]).toEqual([2, "flexhelm serve: --max-ram must be a positive number of GiB, got '-3'"]);
    const twice = await inProcess('summarize', '--suite', 'a', '--suite', 'b');
    expect([twice.status, twice.stderr.split('\n')[0]]).toEqual([2, "flexhelm summarize: --suite is given twice ('a' and 'b'); give it once"]);
    const base = await inProcess('make-model', '--config', '{"base":"foo"}', '--out', join(tmpdir(), 'flexhelm-never-made'));
    expect(base.status).toBe(2);
    expect(base.stderr).toMatch(/^flexhelm make-model: unknown base "foo"; one of llama-3.2-1b, /);
    for (const args of [['generate', '--model', './no-such-model', '-p', 'hi'], ['generate', '--path', './no-such-model', '-p', 'hi'], ['export-onnx', '--model', './no-such-model', '--out', 'x'], ['profile', '--model', './no-such-model']]) {
      const r = await inProcess(...args);
      expect([r.status, r.stderr.split('\n')[0]], args.join(' ')).toEqual([2, `flexhelm ${args[0]}: ${args[1]} ./no-such-model: no such folder`]);
    }
    for (const flag of ['--model', '--path']) {
      const r = await inProcess('run', '-d', 'synthetic_reasoning:mode=induction', flag, './no-such-model', '--offline', '--data-dir', join(tmpdir(), 'flexhelm-no-data'));
      expect([r.status, r.stderr.split('\n').find((l) => l.startsWith('flexhelm run:'))], flag).toEqual([2, `flexhelm run: ${flag} ./no-such-model: no such folder`]);
    }
  });

  it('rejects an unknown command with exit 2', () => {
    const r = flexhelm('run-spec');
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/^flexhelm: unknown command 'run-spec' \(did you mean [^)]*\brun-specs\b[^)]*\?\); run `flexhelm --help` for the list\n$/);
  });
});

describe('flexhelm run-specs', () => {
  it('--help documents every option and the output format', () => {
    const r = flexhelm('run-specs', '--help');
    expect(r.status).toBe(0);
    for (const flag of ['--description D', '--conf-path FILE', '--max-eval-instances N', '--num-train-trials T', '--models-to-run M', '--groups-to-run G', '--priority P', '--names', '--array', '--output-path DIR']) {
      expect(r.stdout).toContain(flag);
    }
    expect(r.stdout).toContain('its run_spec.json text');
  });

  it('prints one RunSpec as HELM writes run_spec.json, plus a newline', () => {
    const r = flexhelm('run-specs', '-d', 'boolq:model=together/opt-175b', '-m', '1000', '-t', '3');
    expect([r.status, r.stderr]).toEqual([0, '']);
    expect(r.stdout.startsWith('{\n  "name": "boolq:model=together_opt-175b",\n  "scenario_spec": {\n    "class_name": "helm.benchmark.scenarios.boolq_scenario.BoolQScenario",\n    "args": {\n      "only_contrast": false\n    }\n  },')).toBe(true);
    expect(r.stdout).toContain('\n    "max_eval_instances": 1000,\n    "num_outputs": 1,\n    "num_train_trials": 3,\n    "model": "together/opt-175b",\n    "temperature": 0.0,\n');
    expect(r.stdout.endsWith('\n  "groups": [\n    "boolq"\n  ]\n}\n')).toBe(true);
  });

  it('prints several RunSpecs as one JSON array; --names lists names', async () => {
    const r = await inProcess('run-specs', '-d', 'imdb:model=opt_tokenizer');
    expect(r.status).toBe(0);
    const parsed = JSON.parse(r.stdout) as { name: string }[];
    expect(parsed.map((x) => x.name)).toEqual(['imdb:model=together_opt-175b', 'imdb:model=together_opt-66b']);
    expect(r.stdout.startsWith('[\n  {\n    "name": "imdb:model=together_opt-175b",\n')).toBe(true);
    const names = await inProcess('run-specs', '-d', 'imdb:model=opt_tokenizer', '-d', 'quac:model=together/opt-66b', '--names');
    expect(names.stdout).toBe('imdb:model=together_opt-175b\nimdb:model=together_opt-66b\nquac:model=together_opt-66b\n');
    expect((await inProcess('run-specs', '-d', 'quac:model=together/opt-66b', '--array')).stdout.startsWith('[\n  {\n')).toBe(true);
    expect((await inProcess('run-specs', '-d', 'quac:model=together/opt-66b', '--models-to-run', 'openai/davinci')).stdout).toBe('[]\n');
  });

  it('reads conf files with priorities and groups, filters, and writes run_spec.json files', () => {
    const dir = mkdtempSync(join(tmpdir(), 'flexhelm-cli-'));
    const conf = join(dir, 'run_specs.conf');
    writeFileSync(
      conf,
      [
        'entries: [',
        '  {description: "boolq:model=opt_tokenizer", priority: 1, groups: ["extra"]}  # comment',
        '  {description: "quac:model=together/opt-66b", priority: 3}',
        ']',
      ].join('\n'),
    );
    const r = flexhelm('run-specs', '-c', conf, '--priority', '2', '--models-to-run', 'together/opt-66b,openai/davinci', '--names');
    expect([r.status, r.stdout]).toEqual([0, 'boolq:model=together_opt-66b,groups=extra\n']);
    const out = join(dir, 'out');
    const w = flexhelm('run-specs', '-c', conf, '-o', out, '--names');
    expect(w.status).toBe(0);
    const file = join(out, 'quac:model=together_opt-66b', 'run_spec.json');
    expect(w.stderr).toContain(`wrote ${file}\n`);
    const written = readFileSync(file, 'utf8');
    expect(written.startsWith('{\n  "name": "quac:model=together_opt-66b",')).toBe(true);
    expect(written.endsWith('}')).toBe(true);
  });

  it('--list shows what descriptions may use', async () => {
    const functions = (await inProcess('run-specs', '--list', 'functions')).stdout.split('\n');
    expect(functions).toHaveLength(54);
    expect(functions).toContain("mmlu: subject, method='multiple_choice_joint'");
    expect(functions).toContain('ice: <any key>=<value>');
    expect(functions[0]).toBe('simple1');
    expect((await inProcess('run-specs', '--list', 'models')).stdout).toContain('together/ul2  [text, limited_functionality_text, ablation, no_newlines, nlg_prefix_tag]\n');
    expect((await inProcess('run-specs', '--list', 'families')).stdout).toContain('opt_tokenizer: together/opt-175b, together/opt-66b\n');
    expect((await inProcess('run-specs', '--list', 'augmentations')).stdout).toContain('misspelling_sweep: misspelling0, misspelling0.05, misspelling0.2, misspelling0.5\n');
    expect((await inProcess('run-specs', '--list', 'expanders')).stdout.split('\n')).toHaveLength(14);
    const bad = await inProcess('run-specs', '--list', 'scenarios');
    expect([bad.status, bad.stderr.split('\n')[0]]).toEqual([2, "flexhelm run-specs: --list takes one of functions, models, families, augmentations, expanders, got 'scenarios'"]);
  });

  it.each([
    [['run-specs'], /give at least one --description D or --conf-path FILE/],
    [['run-specs', '-d', 'mmlu:subject=a,model=nonexistent/model'], /^flexhelm run-specs: run entry "mmlu:subject=a,model=nonexistent\/model": No model with name: nonexistent\/model/],
    [['run-specs', '-d', 'mmlu:subject=a,,model=text'], /Expected <key>=<value>, got ''/],
    [['run-specs', '-d', 'hellaswag:model=text'], /Unknown run spec name: hellaswag; did you mean commonsense:dataset=hellaswag/],
    [['run-specs', '-d', 'boolq', '-t', '0'], /--num-train-trials must be an integer ≥ 1, got '0'/],
    [['run-specs', '-d', 'boolq', '--priority'], /^flexhelm run-specs: --priority needs a value\n/],
    [['run-specs', '-c', '/nonexistent/x.conf'], /cannot read run entries from \/nonexistent\/x\.conf: no such file/],
    [['run-specs', '--bogus'], /^flexhelm run-specs: unknown option --bogus\n/],
  ])('%j fails with exit 2 and a message, no stack', async (args, message) => {
    const r = await inProcess(...args);
    expect(r.status).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(message);
    expect(r.stderr).not.toMatch(/\n\s+at /);
  });

  it('reports a bad conf file with its line', () => {
    const dir = mkdtempSync(join(tmpdir(), 'flexhelm-cli-'));
    const conf = join(dir, 'bad.conf');
    writeFileSync(conf, 'entries: [\n  {description: "boolq:model=text" priority: 1}\n]\n');
    const r = flexhelm('run-specs', '-c', conf);
    expect(r.status).toBe(2);
    expect(r.stderr).toContain(`${conf}:2: expected ',' or a newline after the value of "description"`);
  });
});
