"""The nki target's declaration: what the registry, the prompts, the reply parser, the
executor and the editors need to know about it, without importing the backend.

Python ``@nki.jit`` kernels for AWS Trainium, checked by Autocomp's NKI interpreter (or the Neuron SDK).
"""

from autocomp.backends.base import EditorLanguage, TargetInfo

TARGET = TargetInfo(
    name='nki',
    backend='autocomp.backends.nki:NkiBackend',
    title='AWS Trainium (NKI kernels)',
    label='NKI Python',
    summary='Python `@nki.jit` kernels',
    file_suffixes=('.py',),
    languages=(
        EditorLanguage('python', nvim=('python',), emacs=('python-mode', 'python-ts-mode')),
    ),
    fences={'python': ('python', 'py', 'python3')},
    device_resource='trainium',
    settings_help="NKI settings; leave a key out to use Autocomp's default. Without the AWS Neuron SDK, candidates are checked by Autocomp's NumPy interpreter of NKI and timed by an analytic *estimate*, which is never auto-applied.",
    settings={
        'neuronSdk': {'type': 'boolean', 'description': "Confirm candidates with AWS's nki.simulate / nki.benchmark where the Neuron SDK is installed (default true)."},
        'public_seeds': {'type': 'boolean', 'description': 'Use the listed seeds themselves instead of secret per-evaluation ones (debugging only: a candidate could then carry precomputed answers). Default false.'},
    },
    order=20,
)
