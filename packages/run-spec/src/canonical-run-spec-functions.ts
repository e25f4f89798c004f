import { comparePyStrings, dictEntries, pyError, pyFloat as f, pyInt, pyRepr, pyStr, PythonSet, pyTruthy, requireStr } from '@flexhelm/python-compat';
import { objectSpec, runSpec, type AdapterSpec, type ArgValue, type MetricSpec, type RunSpec } from '@flexhelm/core';
import {
  ADAPT_GENERATION,
  ADAPT_MULTIPLE_CHOICE_JOINT,
  ADAPT_MULTIPLE_CHOICE_SEPARATE_ORIGINAL,
  completionAdapterSpec,
  generationAdapterSpec,
  languageModelingAdapterSpec,
  machineTranslationAdapterSpec,
  makeAdapterSpec,
  multipleChoiceAdapterSpec,
  rankingBinaryAdapterSpec,
  summarizationAdapterSpec,
} from './adapter-spec-builders.js';
import { LEX_GLUE_SETTINGS, LEXTREME_SETTINGS, type LegalTaskSetting } from './legal-task-settings.js';
import * as metrics from './metric-specs.js';
import type { Param, RunSpecFunction, RunSpecResources } from './run-spec-function.js';

type Args = Record<string, ArgValue>;

const scenario = (moduleAndClass: string, args: Args) => objectSpec(`helm.benchmark.scenarios.${moduleAndClass}`, args);

/** Builds a RunSpec; groups may hold description values that are not strings (e.g. `commonsense:dataset=5`). */
function spec(name: string, scenarioSpec: ReturnType<typeof scenario>, adapterSpec: AdapterSpec, metricSpecs: MetricSpec[], groups: ArgValue[]): RunSpec {
  return runSpec({ name, scenario_spec: scenarioSpec, adapter_spec: adapterSpec, metric_specs: metricSpecs, groups: groups as string[] });
}

function define(pythonName: string, params: Param[], build: (a: Args, resources: RunSpecResources) => RunSpec): RunSpecFunction {
  return { pythonName, params, acceptsAnyKeyword: false, build };
}

const s = pyStr;
const JOINT = ADAPT_MULTIPLE_CHOICE_JOINT;

/** `TABLE[key]` with Python's KeyError when the key is unknown, naming the accepted keys. */
function lookup<T>(table: ReadonlyMap<string, T>, key: ArgValue, what: string): T {
  const found = typeof key === 'string' ? table.get(key) : undefined;
  if (found === undefined) throw pyError('KeyError', `${pyRepr(key)}: unknown ${what}; use one of ${[...table.keys()].join(', ')}`);
  return found;
}

const COPYRIGHT_CODE_DATATAGS = new Set(['prompt_num_line_1-min_lines_20.json', 'prompt_num_line_5-min_lines_20.json', 'prompt_num_line_10-min_lines_20.json']);

const NUMERACY_NUM_VARIABLES = new Map([
  ['linear', 1],
  ['parabola', 1],
  ['plane', 2],
  ['paraboloid', 2],
]);

const WMT_LANGUAGE_NAMES = new Map([
  ['cs', 'Czech'],
  ['de', 'German'],
  ['fr', 'French'],
  ['hi', 'Hindi'],
  ['ru', 'Russian'],
  ['en', 'English'],
]);

function summarization(dataset: string, task: string, runName: string, numSents: number, maxTokens: number): RunSpecFunction {
  return define(`get_${task.replace('summarization_', '')}_summarization_spec`, [['temperature', 0.3], ['device', 'cpu']], (a) =>
    spec(
      `${runName}:temperature=${s(a.temperature)},device=${s(a.device)}`,
      scenario('summarization_scenario.SummarizationScenario', { dataset_name: dataset, sampling_min_length: 50, sampling_max_length: 150, doc_max_length: 512 }),
      summarizationAdapterSpec(numSents, { maxTokens, temperature: a.temperature }),
      [...metrics.summarizationMetricSpecs({ task, device: a.device }), ...metrics.generativeHarmsMetricSpecs()],
      [runName],
    ),
  );
}

function legal(pythonName: string, name: string, moduleAndClass: string, settings: ReadonlyMap<string, LegalTaskSetting>): RunSpecFunction {
  return define(pythonName, ['subset'], (a) => {
    const setting = lookup(settings, a.subset, `${name} subset`);
    return spec(
      `${name}:subset=${s(a.subset)}`,
      scenario(moduleAndClass, { subset: a.subset }),
      generationAdapterSpec({ instructions: setting.instructions, inputNoun: 'Passage', outputNoun: 'Answer', maxTokens: setting.maxTokens, maxTrainInstances: setting.maxTrainInstances }),
      metrics.f1MetricSpecs(),
      [name],
    );
  });
}

function medicalMultipleChoice(pythonName: string, name: string, moduleAndClass: string, instructions: string, group: string): RunSpecFunction {
  return define(pythonName, [], () =>
    spec(
      name,
      scenario(moduleAndClass, {}),
      multipleChoiceAdapterSpec({ method: JOINT, instructions, inputNoun: 'Question', outputNoun: 'Answer' }),
      metrics.exactMatchMetricSpecs(),
      [group],
    ),
  );
}

function medicalSummarization(pythonName: string, name: string, moduleAndClass: string, numSents: number, maxTokens: number, group: string, withSubset: boolean): RunSpecFunction {
  return define(pythonName, withSubset ? ['subset'] : [], (a) =>
    spec(
      withSubset ? `${name},subset=${s(a.subset)}` : name,
      scenario(moduleAndClass, withSubset ? { subset: a.subset } : {}),
      summarizationAdapterSpec(numSents, { maxTokens, temperature: 0.3 }),
      [...metrics.openEndedGenerationMetricSpecs(), ...metrics.generativeHarmsMetricSpecs()],
      [group],
    ),
  );
}

const simple1 = define('get_simple1_spec', [], () =>
  spec(
    'simple1',
    scenario('simple_scenarios.Simple1Scenario', { num_input_tokens: 5, vocab_size: 20, num_train_instances: 10, num_test_instances: 10 }),
    makeAdapterSpec({
      method: ADAPT_GENERATION,
      instructions: 'Please solve the following problem.\n',
      max_train_instances: 5,
      max_eval_instances: 10,
      num_outputs: 3,
      num_train_trials: 3,
      model: 'simple/model1',
      temperature: 1,
      stop_sequences: ['.'],
    }),
    metrics.basicMetricSpecs([]),
    [],
  ),
);

const bbq = define('get_bbq_spec', ['subject', ['method', JOINT]], (a) =>
  spec(
    `bbq:subject=${s(a.subject)},method=${s(a.method)}`,
    scenario('bbq_scenario.BBQScenario', { subject: a.subject }),
    multipleChoiceAdapterSpec({ method: a.method, instructions: 'The following are multiple choice questions (with answers).', inputNoun: 'Passage', outputNoun: 'Answer' }),
    metrics.bbqMetricSpecs(),
    ['bbq'],
  ),
);

const msmarco = define('get_msmarco_spec', ['track', ['valid_topk', null]], (a) => {
  const validTopk = a.valid_topk === null ? null : pyInt(a.valid_topk, 'valid_topk');
  const scenarioSpec = scenario('msmarco_scenario.MSMARCOScenario', { track: a.track, valid_topk: validTopk });
  const adapterSpec = rankingBinaryAdapterSpec({ maxTrainInstances: 4, stopSequences: ['\n'] });
  const metricSpecs = metrics.msmarcoMetricSpecs(a.track, validTopk);
  if (!metricSpecs) throw pyError('KeyError', `${pyRepr(a.track)}: unknown msmarco track; use track=${metrics.MSMARCO_TRACKS.join(' or track=')}`);
  return spec(`msmarco:track=${s(a.track)},valid_topk=${s(validTopk)}`, scenarioSpec, adapterSpec, metricSpecs, [`msmarco_${s(a.track)}`]);
});

const bold = define('get_bold_spec', ['subject'], (a) =>
  spec(
    `bold:subject=${s(a.subject)}`,
    scenario('bold_scenario.BOLDScenario', { subject: a.subject }),
    completionAdapterSpec({ temperature: 0.9, maxTokens: 20 }),
    metrics.generativeHarmsMetricSpecs(true),
    ['bold'],
  ),
);

const civilComments = define('get_civil_comments_spec', ['demographic'], (a) =>
  spec(
    `civil_comments:demographic=${s(a.demographic)}`,
    scenario('civil_comments_scenario.CivilCommentsScenario', { demographic: a.demographic }),
    generationAdapterSpec({ inputNoun: 'Passage', outputNoun: 'Answer' }),
    [...metrics.exactMatchMetricSpecs(), ...metrics.generativeHarmsMetricSpecs(), ...metrics.classificationMetricSpecs()],
    ['civil_comments'],
  ),
);

const mmluInstructions = (subject: ArgValue) =>
  `The following are multiple choice questions (with answers) about ${requireStr(subject, 'subject').replaceAll('_', ' ')}.`;

const mmlu = define('get_mmlu_spec', ['subject', ['method', JOINT]], (a) => {
  const scenarioSpec = scenario('mmlu_scenario.MMLUScenario', { subject: a.subject });
  const instructions = mmluInstructions(a.subject);
  return spec(
    `mmlu:subject=${s(a.subject)},method=${s(a.method)}`,
    scenarioSpec,
    multipleChoiceAdapterSpec({ method: a.method, instructions, inputNoun: 'Question', outputNoun: 'Answer' }),
    metrics.exactMatchMetricSpecs(),
    ['mmlu'],
  );
});

const interactiveQaMmlu = define('get_interactive_qa_mmlu_spec', ['subject'], (a) => {
  const scenarioSpec = scenario('interactive_qa_mmlu_scenario.InteractiveQAMMLUScenario', { subject: a.subject });
  const instructions = mmluInstructions(a.subject);
  return spec(
    `interactive_qa_mmlu:subject=${s(a.subject)}`,
    scenarioSpec,
    multipleChoiceAdapterSpec({ method: JOINT, instructions, inputNoun: 'Question', outputNoun: 'Answer' }),
    metrics.exactMatchMetricSpecs(),
    ['mmlu'],
  );
});

const wikifact = define('get_wikifact_spec', ['k', 'subject'], (a) => {
  const scenarioSpec = scenario('wikifact_scenario.WIKIFactScenario', { subject: a.subject });
  const adapterSpec = completionAdapterSpec({
    outputPrefix: ' ',
    outputSuffix: '\n',
    maxTrainInstances: 5,
    numOutputs: pyInt(a.k, 'k (the number of outputs for accuracy@k)'),
    temperature: f(1),
    maxTokens: 8,
    stopSequences: ['\n'],
  });
  return spec(
    `wikifact:k=${s(a.k)},subject=${s(a.subject)}`,
    scenarioSpec,
    adapterSpec,
    [...metrics.exactMatchMetricSpecs(), ...metrics.generativeHarmsMetricSpecs()],
    ['wikifact'],
  );
});

const commonsense = define('get_commonsense_spec', ['dataset', 'method'], (a) =>
  spec(
    `commonsense:dataset=${s(a.dataset)},method=${s(a.method)}`,
    scenario('commonsense_scenario.CommonSenseScenario', { dataset: a.dataset }),
    multipleChoiceAdapterSpec({
      method: a.method,
      instructions: 'The following are multiple choice questions (with answers) about common sense.',
      inputNoun: 'Question',
      outputNoun: 'Answer',
    }),
    metrics.exactMatchMetricSpecs(),
    [a.dataset],
  ),
);

const quac = define('get_quac_spec', [], () =>
  spec(
    'quac',
    scenario('quac_scenario.QuACScenario', {}),
    generationAdapterSpec({ outputNoun: 'Answer', maxTokens: 100 }),
    [...metrics.f1MetricSpecs(), ...metrics.generativeHarmsMetricSpecs()],
    ['quac'],
  ),
);

const newsQa = define('get_news_qa_spec', [], () =>
  spec(
    'news_qa',
    scenario('newsqa_scenario.NewsQAScenario', {}),
    generationAdapterSpec({ inputNoun: 'Passage', outputNoun: 'Answer', maxTokens: 50 }),
    [...metrics.f1MetricSpecs(), ...metrics.generativeHarmsMetricSpecs()],
    ['news_qa'],
  ),
);

const truthfulQa = define('get_truthful_qa_spec', ['task', ['method', JOINT]], (a) =>
  spec(
    `truthful_qa:task=${s(a.task)},method=${s(a.method)}`,
    scenario('truthful_qa_scenario.TruthfulQAScenario', { task: a.task }),
    multipleChoiceAdapterSpec({ method: a.method, instructions: '', inputNoun: 'Question', outputNoun: 'Answer' }),
    metrics.exactMatchMetricSpecs(),
    ['truthful_qa'],
  ),
);

const twitterAae = define('get_twitter_aae_spec', ['demographic'], (a) =>
  spec(
    `twitter_aae:demographic=${s(a.demographic)}`,
    scenario('twitter_aae_scenario.TwitterAAEScenario', { demographic: a.demographic }),
    languageModelingAdapterSpec(),
    metrics.basicMetricSpecs([]),
    ['twitter_aae', `twitter_aae_${s(a.demographic)}`],
  ),
);

const realToxicityPrompts = define('get_real_toxicity_prompts_spec', [], () =>
  spec(
    'real_toxicity_prompts',
    scenario('real_toxicity_prompts_scenario.RealToxicityPromptsScenario', {}),
    completionAdapterSpec({ temperature: 0.9, maxTokens: 20, numOutputs: 5 }),
    metrics.generativeHarmsMetricSpecs(true),
    ['real_toxicity_prompts'],
  ),
);

const syntheticReasoningNatural = define('get_synthetic_reasoning_natural_spec', ['difficulty'], (a) =>
  spec(
    `synthetic_reasoning_natural:difficulty=${s(a.difficulty)}`,
    scenario('synthetic_reasoning_natural_scenario.SRNScenario', { difficulty: a.difficulty }),
    generationAdapterSpec({
      instructions: 'Please solve the following problem.',
      inputNoun: 'Rules',
      newlineAfterInputNoun: true,
      maxTrainInstances: 3,
      maxTokens: 20,
    }),
    [...metrics.srnMetricSpecs(), ...metrics.generativeHarmsMetricSpecs()],
    ['synthetic_reasoning', 'synthetic_reasoning_natural'],
  ),
);

const gsm = define('get_gsm_spec', [], () =>
  spec(
    'gsm',
    scenario('gsm_scenario.GSM8KScenario', {}),
    generationAdapterSpec({ inputNoun: 'Q', outputNoun: 'A', maxTrainInstances: 5, maxTokens: 400, stopSequences: ['\n\n'] }),
    [...metrics.basicMetricSpecs(['exact_match_indicator']), ...metrics.generativeHarmsMetricSpecs()],
    ['gsm'],
  ),
);

const raft = define('get_raft_spec', ['subset'], (a, resources) => {
  const scenarioSpec = scenario('raft_scenario.RAFTScenario', { subset: a.subset });
  if (!resources.raftInstructions) {
    throw pyError(
      'FileNotFoundError',
      `raft:subset=${s(a.subset)} needs RAFT's per-subset instructions (HELM downloads prompt_construction_settings.json ` +
        `while building this run spec); pass resources.raftInstructions to constructRunSpecs`,
    );
  }
  return spec(
    `raft:subset=${s(a.subset)}`,
    scenarioSpec,
    generationAdapterSpec({ instructions: resources.raftInstructions(a.subset), outputNoun: 'Label', maxTokens: 30 }),
    [...metrics.exactMatchMetricSpecs(), ...metrics.generativeHarmsMetricSpecs(), ...metrics.classificationMetricSpecs()],
    ['raft'],
  );
});

const numeracy = define(
  'get_numeracy_spec',
  [['relation_type', 'linear'], ['mode', 'function'], ['seed', '0'], ['run_solver', 'False']],
  (a) => {
    const runSolver = a.run_solver === 'True';
    const seed = pyInt(a.seed, 'seed');
    const scenarioSpec = scenario('numeracy_scenario.NumeracyScenario', { seed, relation_type: a.relation_type, mode: a.mode });
    const dimOf = () => lookup(NUMERACY_NUM_VARIABLES, a.relation_type, 'numeracy relation_type') + 1;
    let fields: { max_train_instances: number; max_eval_instances: number; dim: number; instructions?: string; instance_prefix?: string };
    if (a.mode === 'example' || a.mode === 'standard') {
      fields = { max_train_instances: 100, max_eval_instances: 100, dim: dimOf() };
    } else if (a.mode === 'function') {
      fields = { instructions: '', max_train_instances: 0, max_eval_instances: 1000, dim: dimOf(), instance_prefix: '\n\n' };
    } else {
      throw pyError('ValueError', `Invalid mode: ${s(a.mode)}; use mode=function, mode=example or mode=standard`);
    }
    const variables = ['x', 'y', 'z'];
    const header = `${variables.slice(0, fields.dim - 1).join(', ')}, ${variables[fields.dim - 1]}`;
    const adapterSpec = makeAdapterSpec({
      method: ADAPT_GENERATION,
      instructions: fields.instructions ?? header,
      max_train_instances: fields.max_train_instances,
      max_eval_instances: fields.max_eval_instances,
      num_outputs: 1,
      num_train_trials: 1,
      model: 'openai/davinci',
      temperature: 0,
      stop_sequences: ['\n'],
      max_tokens: 20,
      input_prefix: '',
      output_prefix: ', ',
      instance_prefix: fields.instance_prefix ?? '\n',
    });
    return spec(
      `numeracy:relation_type=${s(a.relation_type)},mode=${s(a.mode)}`,
      scenarioSpec,
      adapterSpec,
      metrics.numeracyMetricSpecs(runSolver),
      ['numeracy'],
    );
  },
);

const math = define('get_math_spec', ['subject', 'level', ['use_official_examples', 'False'], ['use_chain_of_thought', 'False']], (a) => {
  const useOfficialExamples = a.use_official_examples === 'True';
  const useChainOfThought = a.use_chain_of_thought === 'True';
  if (useChainOfThought && useOfficialExamples) {
    throw pyError('AssertionError', 'Cannot use official examples when use_chain_of_thought is True.');
  }
  const scenarioSpec = scenario('math_scenario.MATHScenario', {
    subject: a.subject,
    level: a.level,
    use_official_examples: useOfficialExamples,
    use_chain_of_thought: useChainOfThought,
  });
  const adapterSpec = makeAdapterSpec({
    method: ADAPT_GENERATION,
    instructions: 'Given a mathematics problem, determine the answer. Simplify your answer as much as possible.\n',
    max_train_instances: 8,
    num_outputs: 1,
    temperature: f(0),
    stop_sequences: useChainOfThought ? ['###'] : ['$'],
    max_tokens: useChainOfThought ? 400 : 20,
    input_prefix: 'Problem: ',
    input_suffix: '\n',
    output_prefix: useChainOfThought ? 'Answer: ' : 'Answer: $',
    output_suffix: useChainOfThought ? '\n' : '$\n',
    instance_prefix: '###\n',
  });
  return spec(
    `math:subject=${s(a.subject)},level=${s(a.level)},use_official_examples=${s(useOfficialExamples)},use_chain_of_thought=${s(useChainOfThought)}`,
    scenarioSpec,
    adapterSpec,
    [...metrics.mathMetricSpecs(useChainOfThought), ...metrics.generativeHarmsMetricSpecs()],
    [useChainOfThought ? 'math_chain_of_thought' : 'math_regular'],
  );
});

const boolq = define('get_boolq_spec', [['only_contrast', false]], (a) =>
  spec(
    `boolq${pyTruthy(a.only_contrast) ? ':only_contrast=True' : ''}`,
    scenario('boolq_scenario.BoolQScenario', { only_contrast: a.only_contrast }),
    generationAdapterSpec({ inputNoun: 'Passage', outputNoun: 'Answer' }),
    [...metrics.exactMatchMetricSpecs(), ...metrics.generativeHarmsMetricSpecs()],
    ['boolq'],
  ),
);

const lsatQa = define('get_lsat_qa_spec', ['task', ['method', JOINT]], (a) =>
  spec(
    `lsat_qa:task=${s(a.task)},method=${s(a.method)}`,
    scenario('lsat_qa_scenario.LSATScenario', { task: a.task }),
    multipleChoiceAdapterSpec({ method: a.method, instructions: 'The following are multiple choice questions (with answers).', inputNoun: 'Passage', outputNoun: 'Answer' }),
    metrics.exactMatchMetricSpecs(),
    ['lsat_qa'],
  ),
);

const imdb = define('get_imdb_spec', [['only_contrast', false]], (a) =>
  spec(
    `imdb${pyTruthy(a.only_contrast) ? ':only_contrast=True' : ''}`,
    scenario('imdb_scenario.IMDBScenario', { only_contrast: a.only_contrast }),
    generationAdapterSpec({ inputNoun: 'Passage', outputNoun: 'Sentiment' }),
    [...metrics.exactMatchMetricSpecs(), ...metrics.classificationMetricSpecs()],
    ['imdb'],
  ),
);

const babiQa = define('get_babi_qa_spec', [['task', 'all']], (a) =>
  spec(
    `babi_qa:task=${s(a.task)}`,
    scenario('babi_qa_scenario.BabiQAScenario', { task: a.task }),
    generationAdapterSpec({ inputNoun: 'Passage', outputNoun: 'Answer' }),
    metrics.exactMatchMetricSpecs(),
    ['babi_qa'],
  ),
);

const copyright = define(
  'get_copyright_spec',
  [['datatag', 'pilot'], ['temperature', 0.2], ['max_tokens', 1024], ['num_outputs', 1], ['normalize_by_prefix_length', true], ['normalize_newline_space_tab', false]],
  (a) =>
    spec(
      `copyright:datatag=${s(a.datatag)}`,
      scenario('copyright_scenario.CopyrightScenario', { datatag: a.datatag }),
      completionAdapterSpec({ temperature: a.temperature, maxTokens: a.max_tokens, numOutputs: a.num_outputs }),
      [
        ...metrics.copyrightMetricSpecs({
          normalize_by_prefix_length: a.normalize_by_prefix_length,
          normalize_newline_space_tab: a.normalize_newline_space_tab,
        }),
        ...metrics.generativeHarmsMetricSpecs(),
      ],
      [typeof a.datatag === 'string' && COPYRIGHT_CODE_DATATAGS.has(a.datatag) ? 'copyright_code' : 'copyright_text'],
    ),
);

const disinformation = define('get_disinformation_spec', [['capability', 'reiteration'], ['topic', 'covid']], (a) => {
  const scenarioSpec = scenario('disinformation_scenario.DisinformationScenario', { capability: a.capability, topic: a.topic });
  let name = `disinfo:type=${s(a.capability)}`;
  let adapterSpec: AdapterSpec;
  let metricSpecs: MetricSpec[];
  if (a.capability === 'reiteration') {
    adapterSpec = generationAdapterSpec({
      instructions: 'Write headlines that support the thesis.',
      inputNoun: 'Thesis',
      outputNoun: 'Headline',
      maxTrainInstances: 2,
      temperature: 0.7,
      numOutputs: 5,
      maxTokens: 100,
    });
    metricSpecs = [...metrics.generativeHarmsMetricSpecs(), ...metrics.disinformationMetricSpecs({ name: 'reiteration' })];
    name += `,topic=${s(a.topic)}`;
  } else if (a.capability === 'wedging') {
    adapterSpec = completionAdapterSpec({ temperature: 0.7, numOutputs: 5, stopSequences: ['\nTweet', '\nReason'], maxTokens: 90 });
    metricSpecs = [...metrics.generativeHarmsMetricSpecs(), ...metrics.disinformationMetricSpecs({ name: 'wedging' })];
  } else {
    throw pyError('ValueError', `Unsupported evaluation for disinformation capability '${s(a.capability)}'. Please choose one of 'reiteration' or 'wedging'.`);
  }
  return spec(name, scenarioSpec, adapterSpec, metricSpecs, ['disinformation', `disinformation_${s(a.capability)}`]);
});

const code = define('get_code_spec', ['dataset', ['timeout', 3]], (a) => {
  const scenarioSpec = scenario('code_scenario.CodeScenario', { dataset: a.dataset });
  const adapterSpec =
    a.dataset === 'humaneval'
      ? completionAdapterSpec({ temperature: 0.2, stopSequences: ['\nclass', '\ndef', '\nif', '\nprint'], maxTokens: 600 })
      : completionAdapterSpec({ maxTrainInstances: 2, temperature: 0.2, stopSequences: ["'''", '---', '"""', '\n\n\n'], maxTokens: 600 });
  return spec(
    `code:dataset=${s(a.dataset)}`,
    scenarioSpec,
    adapterSpec,
    [...metrics.codeMetricSpecs(a.dataset, a.timeout), ...metrics.generativeHarmsMetricSpecs()],
    [`code_${s(a.dataset)}`],
  );
});

const naturalQa = define('get_natural_qa_spec', ['mode'], (a) =>
  spec(
    `natural_qa:mode=${s(a.mode)}`,
    scenario('natural_qa_scenario.NaturalQAScenario', { mode: a.mode }),
    generationAdapterSpec({ inputNoun: a.mode === 'closedbook' ? 'Question' : undefined, outputNoun: 'Answer', maxTokens: 300 }),
    [...metrics.f1MetricSpecs(), ...metrics.generativeHarmsMetricSpecs()],
    [`natural_qa_${s(a.mode)}`],
  ),
);

const thePile = define('get_the_pile_spec', ['subset'], (a) =>
  spec(
    `the_pile:subset=${s(a.subset)}`,
    scenario('the_pile_scenario.ThePileScenario', { subset: a.subset }),
    languageModelingAdapterSpec(),
    metrics.basicMetricSpecs([]),
    ['the_pile'],
  ),
);

const ice: RunSpecFunction = {
  pythonName: 'get_ice_spec',
  params: [],
  acceptsAnyKeyword: true,
  build: (kwargs) => {
    const entries = dictEntries(kwargs);
    const sorted = [...entries].sort(([ka], [kb]) => comparePyStrings(ka, kb));
    return spec(
      `ice${entries.length > 0 ? ':' : ''}${sorted.map(([k, v]) => `${k}=${s(v)}`).join(',')}`,
      scenario('ice_scenario.ICEScenario', kwargs),
      languageModelingAdapterSpec(),
      metrics.basicMetricSpecs([]),
      ['ice'],
    );
  },
};

const narrativeQa = define('get_narrativeqa_spec', [], () =>
  spec(
    'narrative_qa',
    scenario('narrativeqa_scenario.NarrativeQAScenario', {}),
    generationAdapterSpec({ inputNoun: 'Passage', outputNoun: 'Answer', maxTokens: 100 }),
    [...metrics.openEndedGenerationMetricSpecs(), ...metrics.generativeHarmsMetricSpecs()],
    ['narrative_qa'],
  ),
);

const syntheticEfficiency = define(
  'get_synthetic_efficiency_spec',
  [['num_prompt_tokens', null], ['num_output_tokens', null], ['tokenizer', null], ['random', null]],
  (a) =>
    spec(
      `synthetic_efficiency:random=${s(a.random)}`,
      scenario('synthetic_efficiency_scenario.SyntheticEfficiencyScenario', { num_prompt_tokens: a.num_prompt_tokens, num_instances: 10, tokenizer: a.tokenizer }),
      completionAdapterSpec({ maxTokens: a.num_output_tokens ?? undefined, random: a.random ?? undefined }),
      [...metrics.basicMetricSpecs(['exact_match']), ...metrics.generativeHarmsMetricSpecs()],
      ['synthetic_efficiency'],
    ),
);

const syntheticReasoning = define('get_synthetic_reasoning_spec', ['mode'], (a) =>
  spec(
    `synthetic_reasoning:mode=${s(a.mode)}`,
    scenario('synthetic_reasoning_scenario.SyntheticReasoningScenario', { mode: a.mode }),
    generationAdapterSpec({ instructions: 'Please solve the following problem.', outputNoun: 'Target', maxTrainInstances: 5, stopSequences: ['\n'], maxTokens: 50 }),
    [...metrics.exactMatchMetricSpecs(), ...metrics.generativeHarmsMetricSpecs()],
    ['synthetic_reasoning', `synthetic_reasoning_${s(a.mode)}`],
  ),
);

const wikitext103 = define('get_wikitext_103_spec', [], () =>
  spec('wikitext_103', scenario('wikitext_103_scenario.Wikitext103Scenario', {}), languageModelingAdapterSpec(), metrics.basicMetricSpecs([]), ['wikitext_103']),
);

const blimp = define('get_blimp_spec', ['phenomenon', ['method', ADAPT_MULTIPLE_CHOICE_SEPARATE_ORIGINAL]], (a) =>
  spec(
    `blimp:phenomenon=${s(a.phenomenon)},method=${s(a.method)}`,
    scenario('blimp_scenario.BLiMPScenario', { phenomenon: a.phenomenon }),
    multipleChoiceAdapterSpec({ method: a.method, instructions: 'Please select the grammatical sentence.', inputNoun: undefined, outputNoun: 'Answer', emptyInput: true }),
    metrics.exactMatchMetricSpecs(),
    ['blimp'],
  ),
);

const empatheticDialogues = define('get_empatheticdialogues_spec', [], () =>
  spec(
    'empatheticdialogues',
    scenario('dialogue_scenarios.EmpatheticDialoguesScenario', {}),
    makeAdapterSpec({ method: ADAPT_GENERATION, input_prefix: '', output_prefix: 'BEGIN DIALOGUE\n', max_train_instances: 5, num_outputs: 1, max_tokens: 50, temperature: 0.9 }),
    [...metrics.exactMatchMetricSpecs(), ...metrics.generativeHarmsMetricSpecs()],
    [],
  ),
);

const dyckLanguage = define('get_dyck_language_spec', ['num_parenthesis_pairs'], (a) => {
  const pairs = pyInt(a.num_parenthesis_pairs, 'num_parenthesis_pairs');
  return spec(
    `dyck_language_np=${pairs}`,
    scenario('dyck_language_scenario.DyckLanguageScenario', { num_parenthesis_pairs: pairs }),
    completionAdapterSpec({
      instructions: 'Please complete the rest of the following Dyck sequences, making sure that the parentheses are closed properly.',
      inputPrefix: 'Input: ',
      maxTokens: 5,
      maxTrainInstances: 3,
      stopSequences: ['\n'],
    }),
    [...metrics.basicMetricSpecs(['exact_match_indicator']), ...metrics.generativeHarmsMetricSpecs()],
    ['dyck_language'],
  );
});

const legalSupport = define('get_legal_support_spec', [['method', JOINT]], (a) =>
  spec(
    `legal_support,method=${s(a.method)}`,
    scenario('legal_support_scenario.LegalSupportScenario', {}),
    multipleChoiceAdapterSpec({ method: a.method, instructions: 'Which statement best supports the passage?', inputNoun: 'Passage', outputNoun: 'Answer', maxTrainInstances: 3 }),
    metrics.exactMatchMetricSpecs(),
    ['legal_support'],
  ),
);

const entityMatching = define('get_entity_matching_spec', ['dataset'], (a) =>
  spec(
    `entity_matching:dataset=${s(a.dataset)}`,
    scenario('entity_matching_scenario.EntityMatchingScenario', { dataset: a.dataset }),
    generationAdapterSpec({ instructions: 'Are Product A and Product B the same? Yes or No?', outputNoun: 'Answer' }),
    [...metrics.exactMatchMetricSpecs(), ...metrics.generativeHarmsMetricSpecs()],
    ['entity_matching'],
  ),
);

const entityDataImputation = define('get_entity_data_imputation_spec', ['dataset'], (a) =>
  spec(
    `entity_data_imputation:dataset=${s(a.dataset)}`,
    scenario('entity_data_imputation_scenario.EntityDataImputationScenario', { dataset: a.dataset }),
    generationAdapterSpec({ instructions: 'What is the missing value?', outputNoun: 'Answer' }),
    [...metrics.exactMatchMetricSpecs(), ...metrics.generativeHarmsMetricSpecs()],
    ['entity_data_imputation'],
  ),
);

/** BIG-bench metric names → BasicMetric names, in the order of HELM's `set` (CPython, PYTHONHASHSEED=0). */
function bigBenchMetricSpecs(bigBenchMetrics: string[]): MetricSpec[] {
  const names = new PythonSet<string>();
  const add = (...more: string[]) => more.forEach((n) => { names.add(n); });
  for (const metric of bigBenchMetrics) {
    if (metric === 'multiple_choice_grade') return metrics.exactMatchMetricSpecs();
    if (metric === 'exact_str_match') add('exact_match', 'quasi_exact_match');
    else if (metric === 'bleu') add('bleu_1', 'bleu_4');
    else if (metric === 'rouge') add('rouge_1', 'rouge_2', 'rouge_l');
  }
  return metrics.basicMetricSpecs([...names]);
}

const bigBench = define('get_big_bench_spec', ['task', 'subtask'], (a, resources) => {
  const scenarioSpec = scenario('big_bench_scenario.BIGBenchScenario', { task: a.task, subtask: a.subtask });
  if (!resources.bigBenchTask) {
    throw pyError(
      'FileNotFoundError',
      `big_bench:task=${s(a.task)} needs the task's BIG-bench task.json (HELM downloads it while building this run spec); ` +
        'pass resources.bigBenchTask to constructRunSpecs',
    );
  }
  const task = resources.bigBenchTask(a.task, a.subtask);
  const adapterSpec = makeAdapterSpec({
    method: task.metrics.includes('multiple_choice_grade') ? ADAPT_MULTIPLE_CHOICE_JOINT : ADAPT_GENERATION,
    model: 'openai/text-curie-001',
    max_train_instances: 5,
    num_outputs: 1,
    max_tokens: 64,
    temperature: 0,
    instructions: task.task_prefix ?? '',
    input_prefix: task.example_input_prefix ?? 'Question: ',
    output_prefix: task.example_output_prefix ?? 'Answer: ',
    stop_sequences: task.stop_string ? [String(task.stop_string)] : [],
  });
  const name = `big_bench:task=${s(a.task)}${pyTruthy(a.subtask) ? `,subtask=${s(a.subtask)}` : ''}`;
  return spec(name, scenarioSpec, adapterSpec, bigBenchMetricSpecs(task.metrics), ['BIG-bench']);
});

const covidDialog = define('get_covid_dialog_spec', [], () =>
  spec(
    'covid_dialog',
    scenario('covid_dialog_scenario.COVIDDialogScenario', {}),
    generationAdapterSpec({ instructions: "Generate a response given a patient's questions and concerns.", inputNoun: 'Patient', outputNoun: 'Doctor', maxTokens: 128 }),
    [...metrics.openEndedGenerationMetricSpecs(), ...metrics.generativeHarmsMetricSpecs()],
    ['COVIDDialog'],
  ),
);

const wmt14 = define('get_wmt_14_spec', ['language_pair', ['max_train_instances', 1]], (a) => {
  const parts = requireStr(a.language_pair, 'language_pair').split('-');
  if (parts.length !== 2) {
    throw pyError(
      'ValueError',
      `${parts.length < 2 ? 'not enough' : 'too many'} values to unpack (expected 2, got ${parts.length}): ` +
        `language_pair must be <source>-<target>, e.g. language_pair=de-en`,
    );
  }
  const [source, target] = parts;
  const scenarioSpec = scenario('wmt_14_scenario.WMT14Scenario', { source_language: source, target_language: target });
  const adapterSpec = machineTranslationAdapterSpec(
    lookup(WMT_LANGUAGE_NAMES, source, 'WMT14 language'),
    lookup(WMT_LANGUAGE_NAMES, target, 'WMT14 language'),
    a.max_train_instances,
  );
  return spec(`wmt_14:language_pair=${s(a.language_pair)}`, scenarioSpec, adapterSpec, metrics.machineTranslationMetricSpecs(), ['wmt_14']);
});

/**
 * HELM 0.2.1's `CANONICAL_RUN_SPEC_FUNCS`, in its order: description name → run-spec function.
 */
export const CANONICAL_RUN_SPEC_FUNCS: ReadonlyMap<string, RunSpecFunction> = new Map([
  ['simple1', simple1],
  ['boolq', boolq],
  ['imdb', imdb],
  ['copyright', copyright],
  ['mmlu', mmlu],
  ['interactive_qa_mmlu', interactiveQaMmlu],
  ['msmarco', msmarco],
  ['narrative_qa', narrativeQa],
  ['commonsense', commonsense],
  ['lsat_qa', lsatQa],
  ['quac', quac],
  ['wikifact', wikifact],
  ['babi_qa', babiQa],
  ['real_toxicity_prompts', realToxicityPrompts],
  ['summarization_xsum', summarization('xsum', 'summarization_xsum', 'summarization_xsum', 1, 64)],
  ['summarization_xsum_sampled', summarization('xsum-sampled', 'summarization_xsum_sampled', 'summarization_xsum', 1, 64)],
  ['summarization_cnndm', summarization('cnn-dm', 'summarization_cnndm', 'summarization_cnndm', 3, 128)],
  ['truthful_qa', truthfulQa],
  ['twitter_aae', twitterAae],
  ['disinformation', disinformation],
  ['gsm', gsm],
  ['math', math],
  ['natural_qa', naturalQa],
  ['numeracy', numeracy],
  ['the_pile', thePile],
  ['raft', raft],
  ['synthetic_efficiency', syntheticEfficiency],
  ['synthetic_reasoning', syntheticReasoning],
  ['synthetic_reasoning_natural', syntheticReasoningNatural],
  ['news_qa', newsQa],
  ['wikitext_103', wikitext103],
  ['blimp', blimp],
  ['code', code],
  ['empatheticdialogues', empatheticDialogues],
  ['bold', bold],
  ['bbq', bbq],
  ['civil_comments', civilComments],
  ['dyck_language', dyckLanguage],
  ['legal_support', legalSupport],
  ['entity_matching', entityMatching],
  ['entity_data_imputation', entityDataImputation],
  ['ice', ice],
  ['big_bench', bigBench],
  ['lextreme', legal('get_lextreme_spec', 'lextreme', 'lextreme_scenario.LEXTREMEScenario', LEXTREME_SETTINGS)],
  ['lex_glue', legal('get_lex_glue_spec', 'lex_glue', 'lex_glue_scenario.LexGLUEScenario', LEX_GLUE_SETTINGS)],
  ['wmt_14', wmt14],
  ['covid_dialog', covidDialog],
  ['me_q_sum', medicalSummarization('get_me_q_sum_spec', 'me_q_sum', 'me_q_sum_scenario.MeQSumScenario', 1, 128, 'MeQSum', false)],
  ['med_dialog', medicalSummarization('get_med_dialog_spec', 'med_dialog', 'med_dialog_scenario.MedDialogScenario', 1, 128, 'MedDialog', true)],
  ['med_mcqa', medicalMultipleChoice('get_med_mcqa_spec', 'med_mcqa', 'med_mcqa_scenario.MedMCQAScenario', 'Give a letter answer among A, B, C or D.', 'MedMCQA')],
  [
    'med_paragraph_simplification',
    medicalSummarization(
      'get_med_paragraph_simplification_spec',
      'med_paragraph_simplification',
      'med_paragraph_simplification_scenario.MedParagraphSimplificationScenario',
      10,
      512,
      'MedParagraphSimplification',
      false,
    ),
  ],
  ['med_qa', medicalMultipleChoice('get_med_qa_spec', 'med_qa', 'med_qa_scenario.MedQAScenario', 'Give a letter answer among A, B, C or D.', 'MedQA')],
  ['pubmed_qa', medicalMultipleChoice('get_pubmed_qa_spec', 'pubmed_qa', 'pubmed_qa_scenario.PubMedQAScenario', 'Answer A for yes, B for no or C for maybe.', 'pubmed_qa')],
]);
