import json, random
g = random.Random(7)
methods = ['generation', 'multiple_choice_joint', 'multiple_choice_separate_original', 'multiple_choice_separate_calibrated', 'language_modeling', 'ranking_binary']
models = ['together/opt-175b', 'huggingface/gpt2']
configs = []
for i in range(160):
    m = g.choice(methods)
    s = g.choice(['mc', 'qa', 'trunc', 'lm_short', 'lm_long']) if m != 'ranking_binary' else g.choice(['mc', 'qa'])
    spec = {'method': m, 'model': g.choice(models), 'max_train_instances': g.choice([0, 1, 2, 5, 8]), 'num_train_trials': g.choice([1, 2, 3]),
            'max_eval_instances': g.choice([None, 1, 2, 3]), 'max_tokens': g.choice([0, 1, 5, 100, 900, 1500, 1900]), 'num_outputs': g.choice([1, 5]),
            'temperature': g.choice([0.0, 1, 0.7]), 'instructions': g.choice(['', 'Answer the question.\n', 'Solve:']),
            'global_prefix': g.choice(['', 'GP']), 'input_prefix': g.choice(['Input: ', '', 'Question: ']), 'output_prefix': g.choice(['Output: ', ' ', 'Answer:\n ']),
            'output_suffix': g.choice(['\n', '']), 'instance_prefix': g.choice(['\n', '\n\n', '']), 'reference_prefix': g.choice(['A. ', '\nA) ', 'Passage: ']),
            'stop_sequences': g.choice([[], ['\n']]), 'random': g.choice([None, 'r1'])}
    if g.random() < 0.2: spec['substitutions'] = [{'source': '\n', 'target': '<br>\n'}]
    configs.append({'set': s, 'spec': spec})
json.dump(configs, open('/tmp/diff/configs.json', 'w'))
