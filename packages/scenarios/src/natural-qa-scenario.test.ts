import { pyHtmlUnescape } from '@flexhelm/python-compat';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { objectSpec } from '@flexhelm/core';
import { afterEach, describe, expect, it } from 'vitest';
import { NATURAL_QA_BASE_URL, NATURAL_QA_FILES, NaturalQAScenario, naturalQaCleanText, naturalQaCleanToken } from './natural-qa-scenario.js';
import { createScenario } from './scenario-registry.js';
import { expectOfflineError, type SourceFixture, sourceFixture } from './test-sources.js';

// Five gzipped nq-dev files of Natural-Questions-shaped examples (HTML with entities and tags, byte-offset answers,
// an example without short answers, empty files), and HELM 0.2.1's [input, references, split] for each mode,
// computed with Python 3.11 (random.seed(0) once, randint per kept example).
const FILES = [
  'H4sIAAAAAAACA9VTTU+DQBC9+ysma8KpSYH0wwrBGDXxoLfetCHbdixNYRfZIdSQ/nd3aatCNCHYSy/LY+bN8Nh5U7KlXOQJCgppTTGya2BTA8BmPfhORpTEJucbEPiRE9zLBdh+XyM/De7422tu2zgxJ7ctnqQe+POAkPv9eQAq4htUKfIMIeFZLAsEC/kiJ/ToCMC63A4cz++nge5rvlOTQHKDQmkRLyWrcKUnDdiuBz8iX1Ia8UpTI0aFhEJmS9XkxuRtrRVp/kxLeM9R0VqKkHBLJl9Eui6ThPB4+/z0MDU6uRCSuKEdNMZSrEIuVIGZDpRMEc8onH+QuWTX1iUolsf3yVArYCqSmrKvOXSpVQ3G9arhVaW7xhlO6pzRaDerWKfQM9O9Lso/PeO08IzT1jPnbBAhYX9rEGGG/7fHeNRlHG6Lcbhtx6GfjjncPTrr7eUEa2X+4+YEm2t32lznl811G5xum9tVT2WmT0JzVcYQBgAA',
  'H4sIAAAAAAACAwMAAAAAAAAAAAA=',
  'H4sIAAAAAAACA9VSy2rDMBC89yuECj4F4sTOqxa6tB/QQ29tMIq9iU1tyZXW2MHk3yvl0dYuhdCeikAa7c7uDhp1NFVJXYLEGHMsgN4R+uQACeiIfCYzLAuXYw5wlk34g0pIwMYWsYrfi+1L7fuwcrvwPVFWEWEbjiDYeMPJVguZAPFAJDVChBdAvNs2nERsXHHbyrXuTUX1CtLYuc8dPeKjhIrTw4h8iXxMH8SPMgYxbBRplE7NkFtg1Ho7tPy1lfBWg8FcyRihRZdvMtBAckMehc6NUymkVCgc6aywUHIXC2ka0DbQUYNCY7zZo3vVqW9LQKaX+3Jq51OTKUs51Zy79KrCRb9qFhzWdt10P9oWXmFbeK1tpZKp2BO0j+HOrc7d8b9dlH/3brX4pXejYedZ2OfMJ9858+mAszz9gXcWuycquwMAAA==',
  'H4sIAAAAAAACA11QXWuDMBR9368IGfhUUEtlH4a8dD9hb1uRq97Vspik5ooO6X9f4tptSiCcnHvPB5l4baq+RU0FnUghf2b8NQCW8Q37GzbUqjATAUjRpPLFVCwTsUfCyj18vPdJgk/hhiSC1uZMlJIQRFxKBso2wCKEqifM6QZYdD/u0lzEVnqn4LwIJfOJ2vnYt4nPeG5gJb9s2D/mN3zFzy1WHA2GDaar3XpXUT5GR/L7B1/h3KOjk9EF4UhhPoZioLUhCPy1lDL6WIB2A3aemLgj6Kgovyj84zbxEtT17f2Y+kjuGuNXfjRXl4Vq97BUZdvLwZ+7b3kf73epAQAA',
  'H4sIAAAAAAACAwMAAAAAAAAAAAA=',
];
const EXPECTED: Record<string, [string, string[], string][]> = {
  "closedbook": [
    [
      "Who wrote hamlet?",
      [
        "marlowe"
      ],
      "train"
    ],
    [
      "What is tea?",
      [
        "tea1",
        "tea2"
      ],
      "valid"
    ],
    [
      "Where is paris?",
      [
        "france"
      ],
      "train"
    ],
    [
      "When?",
      [
        "monday",
        "tuesday",
        "friday"
      ],
      "valid"
    ],
    [
      "X?",
      [
        "alpha"
      ],
      "train"
    ]
  ],
  "openbook_wiki": [
    [
      "Title: Title 0\n\nPassage:  Café & two_words \n\nQuestion: Who wrote hamlet?",
      [
        "marlowe"
      ],
      "train"
    ],
    [
      "Title: Title 2\n\nPassage:  Café & two_words \n\nQuestion: What is tea?",
      [
        "tea1",
        "tea2"
      ],
      "valid"
    ],
    [
      "Title: Title 3\n\nPassage:  Café & two_words \n\nQuestion: Where is paris?",
      [
        "france"
      ],
      "train"
    ],
    [
      "Title: Title 4\n\nPassage:  Café & two_words \n\nQuestion: When?",
      [
        "monday",
        "tuesday",
        "friday"
      ],
      "valid"
    ],
    [
      "Title: Title 5\n\nPassage:  Café & two_words \n\nQuestion: X?",
      [
        "alpha"
      ],
      "train"
    ]
  ],
  "openbook_longans": [
    [
      "Passage: Café & tea shakespeare marlowe été A\n\nQuestion: Who wrote hamlet?",
      [
        "marlowe"
      ],
      "train"
    ],
    [
      "Passage: Café & tea tea1 tea2 tea1 été A\n\nQuestion: What is tea?",
      [
        "tea1",
        "tea2"
      ],
      "valid"
    ],
    [
      "Passage: Café & tea france été A\n\nQuestion: Where is paris?",
      [
        "france"
      ],
      "train"
    ],
    [
      "Passage: Café & tea monday tuesday friday été A\n\nQuestion: When?",
      [
        "monday",
        "tuesday",
        "friday"
      ],
      "valid"
    ],
    [
      "Passage: Café & tea alpha été A\n\nQuestion: X?",
      [
        "alpha"
      ],
      "train"
    ]
  ]
};

let fixture: SourceFixture | undefined;
afterEach(async () => {
  await fixture?.close();
  fixture = undefined;
});

const serve = () =>
  sourceFixture(Object.fromEntries(NATURAL_QA_FILES.map((file, i) => [`${NATURAL_QA_BASE_URL}/${file}`, Buffer.from(FILES[i]!, 'base64')])));
const rows = (instances: { input: { text: string }; references: { output: { text: string }; tags: string[] }[]; split?: string }[]) =>
  instances.map((i) => [i.input.text, i.references.map((r) => r.output.text), i.split]);

describe('NaturalQAScenario', () => {
  it.each(Object.keys(EXPECTED))('mode %s reproduces HELM', async (mode) => {
    fixture = await serve();
    const scenario = createScenario(objectSpec(NaturalQAScenario.className, { mode }));
    expect(rows(await scenario.getInstances(fixture.context))).toEqual(EXPECTED[mode]);
  });

  it('caches parsed examples in <file>-instances.jsonl and reads them back', async () => {
    fixture = await serve();
    await new NaturalQAScenario('closedbook').getInstances(fixture.context);
    const cache = join(fixture.context.outputPath, 'data', 'nq-dev-00.jsonl.gz-instances.jsonl');
    const lines = (await readFile(cache, 'utf8')).trimEnd().split('\n');
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(/^\{"title": "Title 0", "document": " Caf\\u00e9 & two_words ", "question": "who wrote HAMLET", /);
    // A changed cache is what a later run uses (HELM's behaviour).
    await writeFile(cache, `${lines[0]!.replace('who wrote HAMLET', 'edited')}\n${lines[1]}\n`);
    const again = await new NaturalQAScenario('closedbook').getInstances({ ...fixture.context, offline: true });
    expect(again[0]!.input.text).toBe('Edited?');
  });

  it('cleans tokens and answer spans like HELM', () => {
    expect(naturalQaCleanToken('two words')).toBe('two_words');
    expect(naturalQaCleanToken('&lt;br&gt;')).toBe('');
    expect(naturalQaCleanText(Buffer.from('a\u00a0b <i>c</i> &amp;&#65;', 'utf8'))).toBe('a b c &A');
    expect(pyHtmlUnescape('&notit; &ampx &#128; &#xD800; &#0;')).toBe('¬it; &x € \ufffd \ufffd');
  });

  it('validates the mode and works offline only with data', async () => {
    expect(() => new NaturalQAScenario('openbook')).toThrow(/Unknown natural_qa mode/);
    await expectOfflineError((context) => new NaturalQAScenario('closedbook').getInstances(context), `${NATURAL_QA_BASE_URL}/nq-dev-00.jsonl.gz`);
  });
});
