# Stand-in modules for third-party HELM imports that are not installed here and that the adapters do not use.
import sys, types, importlib.abc, importlib.machinery
class _Anything:
    def __init__(self, *a, **k): pass
    def __call__(self, *a, **k): return _Anything()
    def __getattr__(self, n): return _Anything()
    def __mro_entries__(self, bases): return (object,)
    def __iter__(self): return iter(())
class _Stub(types.ModuleType):
    __path__ = []
    def __getattr__(self, name):
        if name.startswith('__'): raise AttributeError(name)
        return _Anything()
class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        root = name.split('.')[0]
        if root in ('helm', 'numpy', 'chardet', 'charset_normalizer', 'simplejson', 'brotli', 'brotlicffi', 'socks', 'cryptography', 'OpenSSL', 'flint', 'gmpy2', 'gmpy', 'IPython', 'matplotlib', 'pytest', 'scipy', 'numexpr', 'bottleneck', 'pyarrow', 'tables') or root in sys.stdlib_module_names: return None
        for f in sys.meta_path:
            if f is self: continue
            try:
                s = f.find_spec(name, path, target)
            except Exception:
                s = None
            if s is not None: return None
        return importlib.machinery.ModuleSpec(name, self, is_package=True)
    def create_module(self, spec): return _Stub(spec.name)
    def exec_module(self, module): pass
sys.meta_path.append(_Finder())
# Skip helm/benchmark/__init__.py (it imports every scenario and metric): load the adapter modules one by one.
import helm
for pkg in ['helm.benchmark', 'helm.benchmark.metrics', 'helm.benchmark.scenarios', 'helm.proxy', 'helm.proxy.clients', 'helm.proxy.services']:
    m = types.ModuleType(pkg); m.__path__ = ['/tmp/helmfull/src/' + pkg.replace('.', '/')]; sys.modules[pkg] = m
