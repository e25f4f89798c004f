/**
 * Per-subset prompt settings of the LEXTREME and LexGLUE scenarios (HELM 0.2.1 `lextreme_scenario.py`,
 * `lex_glue_scenario.py`): [subset, max_train_instances, max_tokens, instructions]. The run-spec functions read them.
 */
export interface LegalTaskSetting {
  maxTrainInstances: number;
  maxTokens: number;
  instructions: string;
}

type Row = [string, number, number, string];
const table = (rows: Row[]): ReadonlyMap<string, LegalTaskSetting> =>
  new Map(rows.map(([subset, maxTrainInstances, maxTokens, instructions]) => [subset, { maxTrainInstances, maxTokens, instructions }]));

export const LEXTREME_SETTINGS = table([
  ["brazilian_court_decisions_judgment", 4, 5, "In this task, you are given the case description from a decision heard at the State Supreme Court of Alagoas (Brazil). Predict the judgment of the case (no: The appeal was denied, partial: For partially favourable decisions, yes: For fully favourable decisions)"],
  ["brazilian_court_decisions_unanimity", 4, 5, "In this task, you are given the case description from a decision heard at the State Supreme Court of Alagoas (Brazil). Predict the unanimity of the case (unanimity, not-unanimity, not_determined)"],
  ["german_argument_mining", 5, 5, "In this task, you are given sentences from German court decisions. Predict the major component of German Urteilsstil (conclusion: Overall result, definition: Abstract legal facts and consequences, subsumption: Determination sentence / Concrete facts, other: Anything else)"],
  ["greek_legal_code_chapter", 1, 20, "In this task, you are given a Greek legislative document. Predict the chapter level category of the 'Permanent Greek Legislation Code - Raptarchis (Ραπτάρχης)' the document belongs to."],
  ["greek_legal_code_subject", 1, 20, "In this task, you are given a Greek legislative document. Predict the subject level category of the 'Permanent Greek Legislation Code - Raptarchis (Ραπτάρχης)' the document belongs to."],
  ["greek_legal_code_volume", 1, 20, "In this task, you are given a Greek legislative document. Predict the volume level category of the 'Permanent Greek Legislation Code - Raptarchis (Ραπτάρχης)' the document belongs to."],
  ["swiss_judgment_prediction", 2, 5, "In this task, you are given the facts description from a decision heard at the Swiss Federal Supreme Court. Predict the judgment of the case (approval or dismissal)"],
  ["online_terms_of_service_unfairness_levels", 5, 10, "In this task, you are given a sentence from a Terms of Service (ToS) document. Predict the unfairness level of the sentence (potentially_unfair, clearly_unfair, clearly_fair, untagged)"],
  ["online_terms_of_service_clause_topics", 5, 10, "In this task, you are given a sentence from a Terms of Service (ToS) document. Predict the clause topics of the sentence (0: Arbitration, 1: Unilateral change, 2: Content removal, 3: Jurisdiction, 4: Choice of law, 5: Limitation of liability, 6: Unilateral termination, 7: Contract by using, 8: Privacy included)"],
  ["covid19_emergency_event", 5, 10, "In this task, you are given a sentence from a European legislative document. Predict the applicable measurements against COVID-19 (0: State of Emergency, 1: Restrictions of fundamental rights and civil liberties, 2: Restrictions of daily liberties, 3: Closures / lockdown, 4: Suspension of international cooperation and commitments, 5: Police mobilization, 6: Army mobilization, 7: Government oversight)"],
  ["multi_eurlex_level_1", 1, 10, "In this task, you are given a document from an EU law. Predict the level 1 concept in the EUROVOC taxonomy."],
  ["multi_eurlex_level_2", 1, 10, "In this task, you are given a document from an EU law. Predict the level 2 concept in the EUROVOC taxonomy."],
  ["multi_eurlex_level_3", 1, 10, "In this task, you are given a document from an EU law. Predict the level 3 concept in the EUROVOC taxonomy."],
  ["greek_legal_ner", 5, 430, "In this task, you are given a sentence from Greek legislation. Predict the named entity type for each token."],
  ["legalnero", 5, 788, "In this task, you are given a sentence from Romanian legislation. Predict the named entity type for each token."],
  ["lener_br", 5, 338, "In this task, you are given a sentence from Brazilian legal documents (court decisions and legislation). Predict the named entity type for each token."],
  ["mapa_coarse", 5, 274, "In this task, you are given a sentence from the EUR-Lex database. Predict the coarse grained named entity type for each token."],
  ["mapa_fine", 5, 274, "In this task, you are given a sentence from the EUR-Lex database. Predict the fine grained named entity type for each token."],
]);

export const LEX_GLUE_SETTINGS = table([
  ["ecthr_a", 1, 20, "In this task, you are given the facts from a case heard at the European Court of Human Rights (ECtHR). Predict the articles of the ECtHR that were violated (if any)."],
  ["ecthr_b", 1, 20, "In this task, you are given the facts from a case heard at the European Court of Human Rights (ECtHR). Predict the articles of ECtHR that were allegedly violated (considered by the court)."],
  ["scotus", 1, 5, "In this task, you are given a case heard at the Supreme Court of the United States (SCOTUS). Predict the relevant issue area."],
  ["eurlex", 5, 20, "In this task, you are given an EU law document published in the EUR-Lex portal. Predict the relevant EuroVoc concepts."],
  ["ledgar", 5, 20, "In this task, you are given a contract provision from contracts obtained from US Securities and Exchange Commission (SEC) filings.Predict the main topic."],
  ["unfair_tos", 5, 20, "In this task, you are given a sentence from a Terms of Service (ToS) document from on-line platforms. Predict the types of unfair contractual terms"],
  ["case_hold", 5, 5, "In this task, you are given an excerpt from a court decision, containing a reference to a particular case, while the holding statement is masked out. Predict the index of the holding statement fitting in the context at <HOLDING> from a selection of five choices."],
]);
