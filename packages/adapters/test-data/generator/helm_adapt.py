# Runs HELM 0.2.1's own adapters (from the mirror, unchanged) with the whitespace-stub tokenizer on many configurations.
import sys, json, re, random
sys.path.insert(0, '/tmp/helmfull'); sys.path.insert(0, '/tmp/helmfull/src')
import stubs
from dataclasses import asdict, replace
from helm.benchmark.adaptation.adapter_spec import AdapterSpec, Substitution
from helm.benchmark.adaptation.adapters.adapter_factory import AdapterFactory
from helm.benchmark.scenarios.scenario import Instance, Input, Reference, Output
import helm.benchmark.adaptation.adapters.in_context_learning_adapter as _icl, helm.benchmark.adaptation.adapters.language_modeling_adapter as _lm
# tqdm is not installed (stubbed), so HELM's parallel_map would yield nothing: map sequentially instead.
_icl.parallel_map = _lm.parallel_map = lambda f, xs, parallelism=1: [f(x) for x in xs]
from helm.common.tokenization_request import TokenizationRequestResult, TokenizationToken, DecodeRequestResult

class StubService:
    def tokenize(self, r):
        toks = re.findall(r'\s*\S+|\s+', r.text)
        if r.encode and r.truncation: toks = toks[:r.max_length]
        return TokenizationRequestResult(success=True, cached=False, text=r.text, tokens=[TokenizationToken(t) for t in toks])
    def decode(self, r):
        return DecodeRequestResult(success=True, cached=False, text=''.join(r.tokens))

sets = json.load(open('/work/shared/conformance/helm/adapters.json'))['instance_sets']
def inst(d):
    return Instance(input=Input(d['input']['text']), references=[Reference(Output(x['output']['text']), tags=x['tags']) for x in d['references']], split=d.get('split'), id=d.get('id'))

configs = json.load(open('/tmp/diff/configs.json'))
import signal
def _alarm(*a): raise TimeoutError('HELM did not terminate (sample_examples loops forever)')
signal.signal(signal.SIGALRM, _alarm)
out = []
for cfg in configs:
    signal.alarm(20)
    spec = AdapterSpec(**{**cfg['spec'], 'substitutions': [Substitution(**s) for s in cfg['spec'].get('substitutions', [])]})
    try:
        adapter = AdapterFactory.get_adapter(spec, StubService())
        instances = [inst(d) for d in sets[cfg['set']]]
        run = adapter.get_run_instances(instances)
        state = adapter.adapt(run, parallelism=1)
        out.append({'ok': [
            {'id': rs.instance.id, 'trial': rs.train_trial_index, 'ref': rs.reference_index, 'mode': rs.request_mode,
             'map': rs.output_mapping, 'n': rs.num_train_instances, 'trunc': rs.prompt_truncated, 'cond': rs.num_conditioning_tokens,
             'prompt': rs.request.prompt, 'max_tokens': rs.request.max_tokens, 'temp': repr(rs.request.temperature), 'random': rs.request.random}
            for rs in state.request_states]})
    except Exception as e:
        signal.alarm(0)
        out.append({'error': type(e).__name__ + ': ' + str(e)[:200]})
json.dump(out, open('/tmp/diff/helm_out.json', 'w'))
print(len(out), sum('error' in o for o in out))
