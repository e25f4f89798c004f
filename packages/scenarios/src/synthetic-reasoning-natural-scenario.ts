import { PythonRandom } from '@flexhelm/python-compat';
import { HelmError, type Instance } from '@flexhelm/core';
import type { Scenario } from './scenario.js';
import { defineScenario, intArg, stringArg } from './scenario-definition.js';
import { problemInstances } from './problem-instances.js';

const SUBJECTS: ReadonlyMap<string, readonly string[]> = new Map([
  ['person', ['Alice', 'Bob', 'Carol', 'Dan', 'Erin', 'Frank']],
  ['animal', ['dog', 'cat', 'rabbit', 'mouse', 'tiger', 'lion', 'bear', 'squirrel', 'cow', 'panda', 'hedgehog', 'elephant', 'giraffe', 'hippo']],
  ['plant', ['poppy', 'dandelion', 'tree', 'rose', 'sunflower']],
]);

/** Each generic attribute with its synonyms (the synonyms appear in hard-mode facts). Order matters: it is shuffled. */
const ATTRIBUTE_GROUPS_SOURCE: readonly [string, readonly string[]][] = [
  ['young', ['young']],
  ['soft', ['soft']],
  ['sad', ['sad']],
  ['scary', ['scary']],
  ['cold', ['cold', 'chill', 'cool']],
  ['hot', ['hot', 'warm']],
  ['smart', ['smart', 'clever', 'wise', 'intelligent']],
  ['clean', ['clean', 'tidy']],
  ['small', ['small', 'little', 'tiny']],
  ['big', ['big', 'enormous', 'giant', 'huge']],
  ['good', ['good', 'kind', 'nice']],
  ['beautiful', ['beautiful', 'pretty']],
  ['red', ['red', 'crimson']],
  ['blue', ['blue', 'cobalt']],
  ['green', ['green', 'viridian']],
  ['purple', ['purple', 'violet']],
  ['boring', ['boring', 'dull']],
  ['old', ['old', 'ancient', 'antique']],
  ['strong', ['strong', 'powerful', 'muscular']],
  ['weak', ['weak', 'frail', 'fragile']],
  ['fast', ['fast', 'quick']],
  ['slow', ['slow', 'sluggish']],
  ['bad', ['bad', 'evil', 'wicked', 'mean']],
  ['happy', ['happy', 'elated', 'glad', 'cheerful']],
  ['round', ['round', 'circular', 'spherical']],
];

/** HELM's `get_vocab` dedup: a generic attribute that is also another group's synonym is dropped. */
function attributeGroups(): Map<string, readonly string[]> {
  const groups = new Map(ATTRIBUTE_GROUPS_SOURCE);
  for (const [general, specifics] of ATTRIBUTE_GROUPS_SOURCE) {
    for (const specific of specifics) if (general !== specific) groups.delete(specific);
  }
  return groups;
}

export const SRN_DIFFICULTIES = ['easy', 'medium', 'hard'] as const;
export type SrnDifficulty = (typeof SRN_DIFFICULTIES)[number];

interface Subject {
  subject: string;
  category: string;
}

interface Rule extends Subject {
  condition: string[];
  conjunction: 'and' | 'or';
  consequent: string;
}

/**
 * HELM's `generate_specified_subject`: people (and the bare class word "person") go without article; otherwise
 * "a"/"an" by a vowel heuristic, or "the".
 */
function specifiedSubject({ subject, category }: Subject, specifier: 'a' | 'the', upper = false): string {
  if (category === 'person' || subject === 'person') return subject;
  const first = upper ? specifier[0]!.toUpperCase() : specifier[0]!.toLowerCase();
  if (specifier === 'the') return `${first}${specifier.slice(1)} ${subject}`;
  return 'aeiou'.includes(subject[0]!.toLowerCase()) ? `${first}n ${subject}` : `${first} ${subject}`;
}

function ruleText(rule: Rule): string {
  const condition = rule.condition.join(` ${rule.conjunction} `);
  return `If ${specifiedSubject(rule, 'a')} is ${condition}, then ${specifiedSubject(rule, 'the')} is ${rule.consequent}.`;
}

/** HELM's `LanguageFact.__str__` with the "the" specifier, upper-cased. */
function factText(subject: Subject, attributes: string[]): string {
  if (attributes.length === 0) return 'Nothing.';
  return `${specifiedSubject(subject, 'the', true)} is ${attributes.join(' and ')}.`;
}

/**
 * HELM's `SRNScenario` ("synthetic reasoning natural"): rules about a subject, a fact, and what follows from them.
 * easy: rules name the subject itself; medium: rules may name its category ("a person", "an animal");
 * hard: like medium, and the fact uses synonyms of the attributes. Name kept as HELM spells it (`sythetic…`).
 */
export class SRNScenario implements Scenario {
  static readonly className = 'helm.benchmark.scenarios.synthetic_reasoning_natural_scenario.SRNScenario';
  readonly className = SRNScenario.className;
  readonly name = 'sythetic_reasoning_natural';
  readonly description = 'Language Pattern Matching';
  readonly tags = ['reasoning', 'language', 'pattern_matching'];
  readonly numTrainInstances = 1000;
  readonly numValInstances = 5000;
  readonly numTestInstances = 5000;
  private readonly groups = attributeGroups();
  private readonly specificCategory: boolean;
  private readonly useSpecificAttributes: boolean;

  constructor(
    readonly difficulty: SrnDifficulty,
    readonly randomSeed = 42,
  ) {
    // HELM treats any other value as "medium"; a typo is far likelier than intent, so it is refused here.
    if (!SRN_DIFFICULTIES.includes(difficulty)) {
      throw new HelmError('ValueError', `Unknown difficulty ${JSON.stringify(difficulty)}: use difficulty=easy, difficulty=medium or difficulty=hard.`);
    }
    this.specificCategory = difficulty === 'easy';
    this.useSpecificAttributes = difficulty === 'hard';
  }

  async getInstances(): Promise<Instance[]> {
    return this.generate();
  }

  generate(): Instance[] {
    const random = new PythonRandom(this.randomSeed);
    return problemInstances(this.numTrainInstances, this.numValInstances, this.numTestInstances, () => {
      const { rules, subject, testAttributes, testSpecific, consequents } = this.generateProblem(random);
      const fact = factText(subject, this.useSpecificAttributes ? testSpecific : testAttributes);
      const input =
        rules.map(ruleText).join('\n') +
        `\nFact:\n${fact}\nThe following can be determined about ${specifiedSubject(subject, 'the')}:`;
      return { input, target: factText(subject, consequents) };
    });
  }

  private generateProblem(random: PythonRandom) {
    const category = random.choice([...SUBJECTS.keys()]);
    const subject: Subject = { subject: random.choice([...SUBJECTS.get(category)!]), category };
    const rules = this.generateRules(random, subject);
    return { rules, subject, ...this.generateTest(random, rules) };
  }

  /** At most 5 rules over disjoint attributes, so a single reasoning step suffices. */
  private generateRules(random: PythonRandom, { subject, category }: Subject, maxRules = 5): Rule[] {
    let attributes = [...this.groups.keys()];
    random.shuffle(attributes);
    const rules: Rule[] = [];
    while (attributes.length > 2 && rules.length < maxRules) {
      const ruleSubject = this.specificCategory ? subject : random.choice([category, subject]);
      const n = random.randint(2, 3);
      const ruleAttributes = attributes.slice(0, n);
      attributes = attributes.slice(n);
      rules.push({
        subject: ruleSubject,
        category,
        condition: ruleAttributes.slice(0, -1),
        conjunction: random.choice(['and', 'or'] as const),
        consequent: ruleAttributes[ruleAttributes.length - 1]!,
      });
    }
    return rules;
  }

  /** Draws two fact attributes; with probability 0.9 re-draws while nothing follows from them. */
  private generateTest(random: PythonRandom, rules: Rule[], pConsequenceless = 0.1) {
    for (;;) {
      const testAttributes = random.sample([...this.groups.keys()], 2);
      const testSpecific = testAttributes.map((a) => random.choice([...this.groups.get(a)!]));
      const consequents: string[] = [];
      for (const rule of rules) {
        if (testAttributes.includes(rule.consequent)) continue;
        const applies =
          rule.conjunction === 'and'
            ? rule.condition.every((c) => testAttributes.includes(c))
            : rule.condition.some((c) => testAttributes.includes(c));
        if (applies) consequents.push(rule.consequent);
      }
      if (consequents.length === 0 && random.random() > pConsequenceless) continue;
      return { testAttributes, testSpecific, consequents };
    }
  }
}

export const srnDefinition = defineScenario(
  SRNScenario.className,
  { difficulty: stringArg(), random_seed: intArg().default(42) },
  (args) => new SRNScenario(args.difficulty as SrnDifficulty, args.random_seed),
);
