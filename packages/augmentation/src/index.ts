export { Perturbation, withSeed } from './perturbation.js';
export { DataAugmenter, createDataAugmenter, type GenerateOptions } from './data-augmenter.js';
export { DataPreprocessor } from './data-preprocessor.js';
export { createPerturbation, PERTURBATION_CLASS_NAMES } from './create-perturbation.js';
export { inputsEqual, inputClassName } from './input-equality.js';
export { downloadFile, ensureDataFile, resolveDataPath, type DataOptions, type EnsureFile, type FileRequest } from './data-files.js';
export {
  HELM_SOURCE_FILES,
  BUNDLED_HELM_DATA_DIR,
  localHelmSourceDir,
  readHelmSourceFile,
  helmContractionMap,
  helmFillerPhrases,
  helmGenderMappings,
  helmKeyboardNeighbours,
  helmMisspellings,
  type HelmSourceFile,
} from './helm-word-lists.js';
export { ExtraSpacePerturbation } from './extra-space-perturbation.js';
export { SpacePerturbation } from './space-perturbation.js';
export { LowerCasePerturbation } from './lower-case-perturbation.js';
export { ContractionPerturbation } from './contraction-perturbation.js';
export { ExpansionPerturbation } from './expansion-perturbation.js';
export { MisspellingPerturbation } from './misspelling-perturbation.js';
export { MildMixPerturbation } from './mild-mix-perturbation.js';
export { FillerWordsPerturbation, type FillerPhrases, type FillerWordsOptions } from './filler-words-perturbation.js';
export { TyposPerturbation } from './typos-perturbation.js';
export { DialectPerturbation, DIALECT_MAPPING_URLS, loadDialectMapping, type DialectOptions } from './dialect-perturbation.js';
export { GenderPerturbation, GENDER_MODES, DEFAULT_GENDERS, type GenderOptions } from './gender-perturbation.js';
export { PersonNamePerturbation, PERSON_NAMES_URL, loadNameFile, type NameCategories, type PersonNameOptions } from './person-name-perturbation.js';
export { ContrastSetsPerturbation } from './contrast-sets-perturbation.js';
export { SynonymPerturbation } from './synonym-perturbation.js';
export { matchCase } from './match-case.js';
