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
        'tier': {'type': 'string', 'enum': ['auto', 'interpreter', 'neuron'], 'description': "Where candidates are checked: `auto` (default) uses AWS's nki.simulate / nki.benchmark where the Neuron SDK imports and Autocomp's interpreter otherwise; `interpreter` always uses the interpreter; `neuron` requires the SDK."},
        'seeds': {'type': 'array', 'items': {'type': 'integer'}, 'description': 'How many random input sets (one per entry) a candidate must match the original on (default [0, 1, 2]). The actual seeds are drawn secretly per evaluation unless public_seeds is true.'},
        'public_seeds': {'type': 'boolean', 'description': 'Use the listed seeds themselves instead of secret per-evaluation ones (debugging only: a candidate could then carry precomputed answers). Default false.'},
        'seed_budget': {'type': 'number', 'minimum': 0, 'description': "CPU seconds the original's runs may take across seeds (default 10): a large problem is checked on fewer random input sets, at least one, and the result says how many; 0 runs every seed."},
        'timeout': {'type': 'number', 'minimum': 1, 'description': 'Seconds allowed for one candidate evaluation in the interpreter (default 60); a run over it is a timeout whose message says to raise this.'},
        'memory_mb': {'type': 'number', 'minimum': 64, 'description': "Memory limit of one evaluation's child process in MiB (default 3072)."},
        'concurrency': {'type': 'integer', 'minimum': 0, 'description': 'Candidates evaluated at once (default 0: one per free CPU core).'},
        'check_reorder': {'type': 'boolean', 'description': 'Also run each candidate with its affine_range loops reversed, to catch iterations that depend on each other (default true).'},
        'reorder_proof': {'type': 'boolean', 'description': "Skip the reversed-loop run when the first run's trace shows that no two affine_range iterations touch the same bytes, accumulations aside (default true); false runs it for every candidate."},
    },
    order=20,
)
