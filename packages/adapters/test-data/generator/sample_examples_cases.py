# Differential check: HELM 0.2.1's sample_examples (read from the mirror, run unchanged) on random train sets.
import json, random, subprocess, textwrap, re
src = subprocess.run(['git','-C','/work/.mirror/stanford-crfm+helm/repo','show','v0.2.1:src/helm/benchmark/adaptation/adapters/in_context_learning_adapter.py'],capture_output=True,text=True).stdout
m = re.search(r'(    def sample_examples.*?)(?=\n    def construct_prompt)', src, re.S)
body = textwrap.dedent(m.group(1))
from collections import defaultdict
from itertools import cycle
from typing import List, Dict, Optional
class Ref:
    def __init__(s, text): s.output = type('O', (), {'text': text})()
class Inst:
    def __init__(s, i, label): s.id = i; s.first_correct_reference = Ref(label) if label is not None else None
ns = {'random': random, 'defaultdict': defaultdict, 'cycle': cycle, 'List': List, 'Dict': Dict, 'Optional': Optional, 'Instance': Inst}
exec(body, ns)
sample_examples = ns['sample_examples']
gen = random.Random(1234)
cases = []
labels_pool = ['yes', 'no', 'maybe', 'B', 'a', '\uff01', '\U0001F600', 'Z', '10', '9']
while len(cases) < 300:
    n = gen.randint(0, 12)
    k = gen.randint(0, 8)
    insts = [(f'id{i}', gen.choice(labels_pool + [None])) for i in range(n)]
    labeled = sum(1 for _, l in insts if l is not None)
    if labeled < min(n, k) and labeled > 0 and any(l is None for _, l in insts):
        # HELM would loop forever when labeled instances run out while unlabeled remain: skip those
        if min(n, k) > labeled: continue
    spec = type('S', (), {'max_train_instances': k})()
    self = type('A', (), {'adapter_spec': spec})()
    objs = [Inst(i, l) for i, l in insts]
    for seed in (0, 1, 2):
        out = sample_examples(self, objs, seed)
        cases.append({'instances': insts, 'k': k, 'seed': seed, 'expected': [o.id for o in out]})
json.dump(cases, open('cases.json', 'w'))
print(len(cases))
