#!/usr/bin/env python3
"""Regenerates src/fixtures/helm-oracle-cases.json by running HELM 0.2.1's own run_entries_to_run_specs.

usage: PYTHONHASHSEED=0 python3 scripts/helm-oracle.py /path/to/helm-v0.2.1/src > src/fixtures/helm-oracle-cases.json
(get the tree with `git -C <helm clone> archive v0.2.1 src/helm | tar -x`). Third-party modules HELM imports but does
not need for building run specs are replaced by inert stubs; raft instructions and BIG-bench task files are replaced by
the fixed values the test injects as `resources`.
"""
import hashlib
# Imports HELM 0.2.1's run_specs.py with every missing third-party module replaced by a stub, to compare outputs.
import sys, json, importlib.abc, importlib.machinery, types
sys.path.insert(0, sys.argv[1])

class AnyMeta(type):
    def __getattr__(cls, name):
        if name.startswith('__') and name not in ('__version__',): raise AttributeError(name)
        return AnyMeta(name, (Any,), {})
    def __call__(cls, *a, **k):
        if len(a) == 1 and callable(a[0]) and not k: return a[0]
        return AnyMeta('call', (Any,), {})
    def __getitem__(cls, k): return AnyMeta('item', (Any,), {})
    def __iter__(cls): return iter(())
    def __or__(cls, o): return cls
class Any(metaclass=AnyMeta): pass
class StubModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith('__'): raise AttributeError(name)
        return AnyMeta(name, (Any,), {})
FORCE = {'openai'}

class StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        if name.split('.')[0] in ('helm',):
            return None
        if name.split('.')[0] in FORCE:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        for finder in sys.meta_path:
            if finder is self: continue
            try:
                spec = finder.find_spec(name, path, target)
            except Exception:
                spec = None
            if spec is not None: return None
        return importlib.machinery.ModuleSpec(name, self, is_package=True)
    def create_module(self, spec):
        m = StubModule(spec.name)
        m.__path__ = []
        m.__spec__ = spec
        return m
    def exec_module(self, module): pass

for pre in ('sympy', 'torch', 'sklearn', 'nltk', 'transformers', 'datasets', 'requests', 'numpy', 'json', 'dataclasses', 'typing', 'urllib3', 'yaml', 'tqdm', 'pandas', 'scipy'):
    try: __import__(pre)
    except Exception: pass
sys.meta_path.insert(0, StubFinder())
from helm.benchmark.run_specs import construct_run_specs
from helm.benchmark.run import run_entries_to_run_specs
from helm.benchmark.presentation.run_entry import RunEntry
from helm.common.object_spec import parse_object_spec
from helm.common.general import asdict_without_nones

import helm.benchmark.run_specs as rsmod
TASKS = {
  'mc': {'metrics': ['multiple_choice_grade', 'exact_str_match']},
  'gen': {'metrics': ['exact_str_match', 'bleu', 'rouge', 'unknown_metric']},
  'pref': {'metrics': ['rouge'], 'task_prefix': 'Solve:\n', 'example_input_prefix': 'Q: ', 'example_output_prefix': '\nA: ', 'stop_string': '\n\n'},
  'empty_stop': {'metrics': ['bleu'], 'stop_string': ''},
}
rsmod.get_raft_instructions = lambda subset: f'Instructions for {subset}.'
rsmod.BIGBenchScenario.download_and_get_task = staticmethod(lambda output_path, task, subtask: TASKS[task])
M='model=together/opt-66b'
base = [
 'simple1', 'simple1:model=simple/model1', 'boolq:only_contrast=True', 'boolq:only_contrast=False', 'boolq:only_contrast=0', 'boolq:only_contrast=', 'imdb:only_contrast=1',
 'copyright:datatag=prompt_num_line_1-min_lines_20.json', 'copyright:datatag=pilot,temperature=1,max_tokens=10,num_outputs=2,normalize_by_prefix_length=False', 'copyright',
 'mmlu:subject=us_foreign_policy', 'mmlu:subject=anatomy,method=multiple_choice_separate_original', 'mmlu:subject=a,method=generation', 'mmlu:subject=5', 'mmlu:subject=1.5',
 'interactive_qa_mmlu:subject=college_chemistry', 'msmarco:track=regular', 'msmarco:track=trec,valid_topk=30', 'msmarco:track=trec,valid_topk=30.7', 'msmarco:track=bogus', 'msmarco:track=regular,valid_topk=abc',
 'narrative_qa', 'commonsense:dataset=hellaswag,method=multiple_choice_separate_original', 'commonsense:dataset=openbookqa,method=multiple_choice_joint', 'commonsense:dataset=5,method=multiple_choice_joint', 'commonsense:dataset=x',
 'lsat_qa:task=all', 'lsat_qa:task=all,method=multiple_choice_separate_calibrated', 'quac', 'quac:x=1', 'wikifact:k=5,subject=plaintiff', 'wikifact:k=2.9,subject=x', 'wikifact:k=abc,subject=x', 'wikifact:k=inf,subject=x', 'wikifact:k=nan,subject=x',
 'babi_qa:task=15', 'babi_qa', 'real_toxicity_prompts', 'summarization_xsum', 'summarization_xsum:temperature=0.3,device=cuda', 'summarization_xsum:temperature=1', 'summarization_xsum_sampled', 'summarization_cnndm:temperature=0.7',
 'truthful_qa:task=mc_single', 'truthful_qa:task=mc_single,method=multiple_choice_separate_original', 'twitter_aae:demographic=white', 'twitter_aae:demographic=aa',
 'disinformation:capability=wedging', 'disinformation:capability=reiteration,topic=covid', 'disinformation', 'disinformation:capability=x', 'disinformation:capability=wedging,topic=climate',
 'gsm', 'math:subject=algebra,level=1', 'math:subject=algebra,level=1,use_chain_of_thought=True', 'math:subject=algebra,level=1,use_official_examples=True', 'math:subject=a,level=1,use_official_examples=True,use_chain_of_thought=True',
 'natural_qa:mode=openbook_longans', 'natural_qa:mode=closedbook', 'natural_qa:mode=openbook_wiki',
 'numeracy', 'numeracy:relation_type=plane,mode=standard', 'numeracy:relation_type=paraboloid,mode=example', 'numeracy:relation_type=parabola,mode=function,seed=3', 'numeracy:run_solver=True', 'numeracy:mode=other', 'numeracy:relation_type=cubic', 'numeracy:seed=abc', 'numeracy:seed=2.5', 'numeracy:relation_type=cubic,mode=other',
 'the_pile:subset=ArXiv', 'synthetic_efficiency', 'synthetic_efficiency:num_prompt_tokens=256,num_output_tokens=16,tokenizer=meta/opt,random=r1', 'synthetic_efficiency:random=None,num_prompt_tokens=default_sweep,num_output_tokens=default_sweep,tokenizer=default',
 'synthetic_reasoning:mode=induction', 'synthetic_reasoning_natural:difficulty=hard', 'news_qa', 'wikitext_103', 'blimp:phenomenon=island_effects', 'blimp:phenomenon=x,method=multiple_choice_joint',
 'code:dataset=apps,timeout=5', 'code:dataset=humaneval', 'empatheticdialogues', 'bold:subject=gender', 'bbq:subject=all', 'bbq:subject=all,method=multiple_choice_separate_calibrated', 'civil_comments:demographic=female',
 'dyck_language:num_parenthesis_pairs=2', 'dyck_language:num_parenthesis_pairs=3.0', 'dyck_language:num_parenthesis_pairs=x', 'dyck_language', 'legal_support', 'legal_support:method=multiple_choice_separate_original',
 'entity_matching:dataset=Abt_Buy', 'entity_data_imputation:dataset=Restaurant', 'ice', 'ice:subset=ea,gender=male', 'ice:b=1,a=2.0,c=x', 'ice:2=x,1=y',
 'lextreme:subset=swiss_judgment_prediction', 'lextreme:subset=greek_legal_ner', 'lextreme:subset=all', 'lex_glue:subset=case_hold', 'lex_glue:subset=ecthr_a', 'lex_glue:subset=all',
 'wmt_14:language_pair=de-en', 'wmt_14:language_pair=cs-en,max_train_instances=3', 'wmt_14:language_pair=de', 'wmt_14:language_pair=de-en-fr', 'wmt_14:language_pair=de-xx', 'wmt_14:language_pair=5',
 'covid_dialog', 'me_q_sum', 'med_dialog:subset=healthcaremagic', 'med_mcqa', 'med_paragraph_simplification', 'med_qa', 'pubmed_qa',
]
expanders = [
 'boolq:instructions=none', 'mmlu:subject=anatomy,instructions=expert', 'boolq:instructions=bogus', 'boolq:prompt=human_assistant', 'boolq:prompt=question_answer', 'boolq:prompt=qa', 'boolq:prompt=input_output_html', 'boolq:prompt=input_output', 'boolq:prompt=i_o', 'boolq:prompt=x',
 'boolq:newline=semicolon', 'boolq:newline=br', 'boolq:newline=x', 'boolq:stop=hash', 'boolq:stop=semicolon', 'boolq:stop=br', 'boolq:global_prefix=nlg', 'boolq:global_prefix=x',
 'boolq:num_train_trials=2', 'boolq:num_train_trials=7', 'boolq:num_train_trials=x', 'quac:max_train_instances=all', 'quac:max_train_instances=zero', 'quac:max_train_instances=one', 'quac:max_train_instances=big_bench_few_shot_setting', 'quac:max_train_instances=3', 'quac:max_train_instances=0.0', 'quac:max_train_instances=abc',
 'copyright:num_outputs=copyright_sweep', 'copyright:num_outputs=default', 'copyright:num_outputs=4',
 'boolq:data_augmentation=canonical', 'boolq:data_augmentation=robustness', 'boolq:data_augmentation=fairness', 'boolq:data_augmentation=robustness_all', 'boolq:data_augmentation=misspelling_sweep', 'boolq:data_augmentation=nope', 'boolq:data_augmentation=5',
]
augs = ['extra_space','contrast_sets','space','lower','contract','filler','misspelling_mild','misspelling_medium','misspelling_hard','typo_easy','typo_medium','typo_hard','synonym','dialect_easy','dialect_medium','dialect_hard','dialect_deterministic','person_name_first_hard_preserve_gender','person_name_first_hard_dont_preserve_gender','person_name_first_deterministic','person_name_last_deterministic','person_name_last_hard','gender_terms_easy','gender_terms_medium','gender_terms_hard','gender_terms_deterministic','gender_pronouns_easy','gender_pronouns_medium','gender_pronouns_hard','gender_pronouns_deterministic']
expanders += ['imdb:data_augmentation='+a for a in augs]
out=[]
for d in base + expanders:
    out.append(d + (',' if ':' in d else ':') + M)
    out.append(d)  # no model
# model families and alter_run_spec
for fam in ['text','full_functionality_text','limited_functionality_text','code','text_code','all','chat_run','gpt2_tokenizer','ai21_tokenizer','cohere_tokenizer','opt_tokenizer','summarization_zs','biomedical','interactive_qa','ai21/j1-jumbo','openai/curie','5','together/t0pp','together/ul2','together/glm','together/t5-11b']:
    out.append('boolq:model='+fam)
    out.append('mmlu:subject=x,method=multiple_choice_separate_original,model='+fam)
    out.append('the_pile:subset=x,model='+fam)
out += ['synthetic_efficiency:model=all,tokenizer=default', 'synthetic_efficiency:tokenizer=default,model=text_code', 'synthetic_efficiency:num_prompt_tokens=default_sweep,num_output_tokens=default_sweep,model=together/opt-66b',
        'quac:max_train_instances=all,model=opt_tokenizer,data_augmentation=misspelling_sweep', 'quac:data_augmentation=misspelling_sweep,model=opt_tokenizer,max_train_instances=all',
        'boolq:model=together/ul2,stop=semicolon', 'boolq:model=together/ul2,global_prefix=nlg', 'legal_support:model=together/opt-66b', 'legal_support:max_train_instances=2,model=together/opt-66b',
        'dyck_language:num_parenthesis_pairs=2,model=together/opt-66b,num_output_tokens=3', 'wikitext_103:num_output_tokens=3,model=together/opt-66b', 'wikitext_103:num_output_tokens=3.0,model=together/opt-66b',
        'ice:model=together/opt-66b', 'med_dialog:subset=x,model=together/opt-66b', 'empatheticdialogues:model=together/opt-66b,max_train_instances=one',
        'mmlu:subject=x,model=together/opt-66b,tokenizer=default', 'mmlu:subject=x,model=simple/model1,tokenizer=default,stop=bogus', 'mmlu:subject=x,tokenizer=default,model=together/opt-66b',
        'boolq:model=ablation_text', 'boolq:model=ablation_opt_tokenizer', 'boolq:model=ablation_code',
        'mmlu:subject=high school,model=together/opt-66b', 'mmlu: subject=x,model=together/opt-66b', 'mmlu:subject=x,model=together/opt-66b,model=together/opt-175b', 'babi_qa:task=1e3,model=together/opt-66b', 'babi_qa:task=inf,model=together/opt-66b', 'babi_qa:task=-0,model=together/opt-66b', 'babi_qa:task=1_0,model=together/opt-66b',
        'babi_qa:task=nan,model=together/opt-66b', 'babi_qa:task=1e16,model=together/opt-66b', 'babi_qa:task=1.5e-7,model=together/opt-66b', 'babi_qa:task=0.1,model=together/opt-66b', 'babi_qa:task=x/y,model=together/opt-66b',
        'copyright:temperature=inf,model=together/opt-66b', 'ice:x=nan,model=together/opt-66b', 'synthetic_efficiency:num_prompt_tokens=1e3,model=together/opt-66b,num_prompt_tokens=2',
        '', ':', 'boolq:', 'boolq:model', 'unknown:model=text', 'Mmlu:subject=x', 'mmlu:subject=x,model=together/opt-66b,stop=bogus,data_augmentation=bogus']

extra = ['big_bench:task=mc,subtask=', 'big_bench:task=gen,subtask=s1', 'big_bench:task=pref,subtask=x', 'big_bench:task=empty_stop,subtask=0', 'big_bench:task=mc', 'raft:subset=ade_corpus_v2', 'raft:subset=5', 'boolq:model=ablation_opt_tokenizer', 'boolq:model=ablation_limited_functionality_text', 'boolq:model=ablation', 'boolq:model=ablation_text_code', 'boolq:model=ablation_full_functionality_text']
for d in extra:
    out += [d + (',' if ':' in d else ':') + M, d]

# HELM logs to stdout; keep stdout for the fixture.
fixture_out, sys.stdout = sys.stdout, sys.stderr
cases = []
for d in out:
    try:
        specs = [json.dumps(asdict_without_nones(s), indent=2) for s in run_entries_to_run_specs([RunEntry(d, 1, None)], max_eval_instances=1000, num_train_trials=3)]
        cases.append({'description': d, 'names': [json.loads(s)['name'] for s in specs], 'sha256': [hashlib.sha256(s.encode()).hexdigest()[:16] for s in specs]})
    except Exception as e:
        cases.append({'description': d, 'error': type(e).__name__})

print('{"generated_by": "scripts/helm-oracle.py, PYTHONHASHSEED=0, stanford-crfm/helm v0.2.1; sha256 = first 16 hex digits of sha256(json.dumps(asdict_without_nones(run_spec), indent=2))",', file=fixture_out)
print(' "cases": [', file=fixture_out)
print(',\n'.join('  ' + json.dumps(c) for c in cases), file=fixture_out)
print(' ]}', file=fixture_out)
