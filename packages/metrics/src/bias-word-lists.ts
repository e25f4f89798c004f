import { HelmError } from '@flexhelm/core';

/** The word lists HELM 0.2.1's BiasMetric counts (`bias_word_lists.py`), groups in file order. */
export interface BiasWordLists {
  /** female / male → gendered words (Bolukbasi et al. 2016). */
  gender: Map<string, string[]>;
  /** asian / hispanic / white → common names (Garg et al. 2018). */
  race: Map<string, string[]>;
  adjectives: string[];
  professions: string[];
}

const LIST = /^([A-Z_]+)\s*:\s*List\[str\]\s*=\s*\[([\s\S]*?)^\]/gm;
const DICT = /^([A-Z_]+)\s*:\s*Dict\[str,\s*List\[str\]\]\s*=\s*\{([\s\S]*?)^\}/gm;

function pythonStrings(body: string, where: string): string[] {
  const out: string[] = [];
  const rest = body.replace(/#.*$/gm, '').replace(/"((?:[^"\\]|\\.)*)"|'((?:[^'\\]|\\.)*)'/g, (_m, dq: string | undefined, sq: string | undefined) => {
    out.push(JSON.parse(`"${(dq ?? sq ?? '').replace(/\\'/g, "'").replace(/"/g, '\\"')}"`) as string);
    return '';
  });
  if (/[^\s,]/.test(rest)) throw new HelmError('ValueError', `${where}: expected only string literals in the list, found ${JSON.stringify(rest.trim().slice(0, 40))}`);
  return out;
}

/**
 * Reads HELM v0.2.1's `src/helm/benchmark/metrics/bias_word_lists.py` (the lists are HELM's data; flexhelm does
 * not ship a copy — fetch the file from the HELM repository at that tag and pass its text here).
 */
export function parseBiasWordLists(pythonSource: string): BiasWordLists {
  const lists = new Map<string, string[]>();
  for (const m of pythonSource.matchAll(LIST)) lists.set(m[1]!, pythonStrings(m[2]!, m[1]!));
  const dict = (name: string): Map<string, string[]> => {
    for (const m of pythonSource.matchAll(DICT)) {
      if (m[1] !== name) continue;
      const out = new Map<string, string[]>();
      for (const entry of m[2]!.matchAll(/"([^"]+)"\s*:\s*([A-Z_]+)/g)) {
        const words = lists.get(entry[2]!);
        if (!words) throw new HelmError('ValueError', `bias_word_lists.py: ${name} refers to unknown list ${entry[2]}`);
        out.set(entry[1]!, words);
      }
      if (out.size === 0) break;
      return out;
    }
    throw new HelmError('ValueError', `bias_word_lists.py has no ${name}; is it HELM v0.2.1's src/helm/benchmark/metrics/bias_word_lists.py?`);
  };
  const list = (name: string) => {
    const words = lists.get(name);
    if (!words) throw new HelmError('ValueError', `bias_word_lists.py has no ${name}; is it HELM v0.2.1's src/helm/benchmark/metrics/bias_word_lists.py?`);
    return words;
  };
  return { gender: dict('GENDER_TO_WORD_LISTS'), race: dict('RACE_TO_NAME_LISTS'), adjectives: list('ADJECTIVE_LIST'), professions: list('PROFESSION_LIST') };
}
