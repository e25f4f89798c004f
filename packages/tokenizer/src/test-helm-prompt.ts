/** HELM 0.2.1's `window_services/test_utils.py` TEST_PROMPT and GPT-2 expectations. */
export const TEST_PROMPT =
  'The Center for Research on Foundation Models (CRFM) is ' +
  'an interdisciplinary initiative born out of the Stanford ' +
  'Institute for Human-Centered Artificial Intelligence (HAI) ' +
  'that aims to make fundamental advances in the study, development, ' +
  'and deployment of foundation models.';

export const GPT2_TEST_TOKEN_IDS = [
  464, 3337, 329, 4992, 319, 5693, 32329, 357, 9419, 23264, 8, 318, 281, 987, 40625, 10219, 4642, 503, 286, 262, 13863,
  5136, 329, 5524, 12, 19085, 1068, 35941, 9345, 357, 7801, 40, 8, 326, 12031, 284, 787, 7531, 14901, 287, 262, 2050, 11,
  2478, 11, 290, 14833, 286, 8489, 4981, 13,
];

/** Also HELM's expected `tokenize` output for OPT (`test_opt_window_service.py`): OPT uses GPT-2's merges. */
export const GPT2_TEST_TOKENS = [
  'The', 'ĠCenter', 'Ġfor', 'ĠResearch', 'Ġon', 'ĠFoundation', 'ĠModels', 'Ġ(', 'CR', 'FM', ')', 'Ġis', 'Ġan', 'Ġinter',
  'disciplinary', 'Ġinitiative', 'Ġborn', 'Ġout', 'Ġof', 'Ġthe', 'ĠStanford', 'ĠInstitute', 'Ġfor', 'ĠHuman', '-', 'Cent',
  'ered', 'ĠArtificial', 'ĠIntelligence', 'Ġ(', 'HA', 'I', ')', 'Ġthat', 'Ġaims', 'Ġto', 'Ġmake', 'Ġfundamental',
  'Ġadvances', 'Ġin', 'Ġthe', 'Ġstudy', ',', 'Ġdevelopment', ',', 'Ġand', 'Ġdeployment', 'Ġof', 'Ġfoundation', 'Ġmodels', '.',
];

/** Text that trips tokenizers: accents, CJK, emoji sequences, control and invisible characters, odd spacing. */
export const TRICKY_TEXTS = [
  'Café naïve résumé — “quotes” ‘single’',
  '日本語のテキストと中文字符',
  'emoji 👩‍👩‍👧‍👦 👍🏽 🇫🇷 done',
  'line\r\nbreaks\n\n\ttabs   and  spaces ',
  "  leading and trailing  ",
  "don't it's we're they've I'm you'll he'd",
  '1234567890 3.14159 1e-5 -42',
  'nul\u0000 repl\ufffd zwsp\u200b end',
  'ligatures ﬁ ﬂ and fullwidth ＡＢＣ１２３',
  "their 'studio'",
  '<|endoftext|> inside text',
];
