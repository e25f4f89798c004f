import { pyFloat, type PyNumber, type PythonRandom, toNumber } from '@flexhelm/python-compat';
import { perturbationDescription, type PerturbationDescription } from '@flexhelm/core';
import type { DataOptions } from './data-files.js';
import { helmFillerPhrases } from './helm-word-lists.js';
import { Perturbation } from './perturbation.js';

/** The three phrase lists FillerWordsPerturbation draws from. */
export interface FillerPhrases {
  speaker: readonly string[];
  uncertain: readonly string[];
  fill: readonly string[];
}

export interface FillerWordsOptions {
  /** Probability of a filler before each space-separated word (`random() <= insert_prob`); HELM's default 0.333. */
  insertProb?: PyNumber;
  /** At most this many fillers per text; undefined = no limit (HELM's None). */
  maxNumInsert?: number;
  speakerPh?: boolean;
  uncertainPh?: boolean;
  fillPh?: boolean;
}

/** `FillerWordsPerturbation`: inserts "umm", "probably", "I think"… before words, at random. */
export class FillerWordsPerturbation extends Perturbation {
  readonly name = 'filler_words';
  readonly insertProb: PyNumber;
  private readonly fillers: string[];
  private readonly maxNumInsert: number | undefined;

  constructor(phrases: FillerPhrases, options: FillerWordsOptions = {}) {
    super();
    const { insertProb = pyFloat(0.333), maxNumInsert, speakerPh = true, uncertainPh = true, fillPh = true } = options;
    this.insertProb = insertProb;
    this.maxNumInsert = maxNumInsert;
    this.fillers = [...(speakerPh ? phrases.speaker : []), ...(uncertainPh ? phrases.uncertain : []), ...(fillPh ? phrases.fill : [])];
  }

  static async create(options: FillerWordsOptions = {}, dataOptions?: DataOptions): Promise<FillerWordsPerturbation> {
    return new FillerWordsPerturbation(await helmFillerPhrases(dataOptions), options);
  }

  override get description(): PerturbationDescription {
    return perturbationDescription(this.name, { robustness: true, insert_prob: this.insertProb });
  }

  perturb(text: string, rng: PythonRandom): string {
    const prob = toNumber(this.insertProb);
    const out: string[] = [];
    let inserted = 0;
    for (const word of text.split(' ')) {
      if ((this.maxNumInsert === undefined || inserted < this.maxNumInsert) && rng.random() <= prob) {
        out.push(rng.choice(this.fillers));
        inserted++;
      }
      out.push(word);
    }
    return out.join(' ');
  }
}
