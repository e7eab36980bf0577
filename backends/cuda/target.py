"""The cuda target's declaration: what the registry, the prompts, the reply parser, the
executor and the editors need to know about it, without importing the backend.

CUDA kernels (``.cu`` files and KernelBench-style Python with inline CUDA), compiled with nvcc and timed on a GPU.
"""

from autocomp.backends.base import EditorLanguage, TargetInfo

TARGET = TargetInfo(
    name='cuda',
    backend='autocomp.backends.cuda:CudaBackend',
    title='NVIDIA GPUs (CUDA)',
    label='CUDA',
    summary='`.cu` files and KernelBench-style Python',
    file_suffixes=('.cu', '.cuh', '.py'),
    languages=(
        EditorLanguage('cuda-cpp', nvim=('cuda',), emacs=('cuda-mode', 'c++-mode', 'c++-ts-mode')),
        EditorLanguage('python', nvim=('python',), emacs=('python-mode', 'python-ts-mode')),
    ),
    fences={'cuda': ('cuda', 'cu', 'cpp', 'c++', 'c'), 'python': ('python', 'py', 'python3')},
    device_resource='GPU',
    settings_help='CUDA settings; leave a key out to use Autocomp\'s default. Example: `{"arch": "sm_90", "remote": "ssh gpu-host autocomp worker"}`.',
    settings={
        'arch': {'type': 'string', 'description': 'GPU architecture candidates are compiled for (nvcc -arch); default sm_90 (H100).'},
        'remote': {'type': 'string', 'description': "A command that runs Autocomp's timing worker on a GPU host (for example over ssh). Without a GPU (local or remote) only compile checks run, and they are never shown as speedups."},
        'remote_timeout': {'type': 'number', 'minimum': 1, 'description': 'Seconds one batch of candidates may take on the remote worker (default 1800).'},
        'gpu': {'type': 'string', 'enum': ['auto', 'off'], 'description': 'Time candidates on a local NVIDIA GPU when one is visible (`auto`, the default) or never (`off`; also AUTOCOMP_CUDA_GPU=off).'},
        'nvcc': {'type': 'string', 'description': 'The nvcc executable (default: $NVCC, then nvcc on PATH, then /usr/local/cuda/bin/nvcc).'},
        'flags': {'type': 'array', 'items': {'type': 'string'}, 'description': 'Extra nvcc flags for every candidate, e.g. ["-O3", "--use_fast_math"] (default none).'},
        'compile_timeout': {'type': 'number', 'minimum': 1, 'description': 'Seconds allowed for compiling one candidate (default 180).'},
        'jobs': {'type': 'integer', 'minimum': 1, 'description': 'Candidates compiled at once (default: one per free CPU core).'},
        'cache_dir': {'type': 'string', 'description': "Where compile results and torch extensions are cached (default: $AUTOCOMP_CUDA_CACHE, else the store's home under cache/cuda)."},
        'seeds': {'type': 'array', 'items': {'type': 'integer'}, 'description': 'Input sets a candidate must match the original on, on the GPU tier (default [0, 1, 2]; at least 3 checks run).'},
        'trials': {'type': 'integer', 'minimum': 100, 'description': 'Timed launches per candidate on the GPU tier (default and minimum 100, as KernelBench times).'},
        'warmup': {'type': 'integer', 'minimum': 0, 'description': 'Untimed launches before timing on the GPU tier (default 3).'},
        'gpu_timeout': {'type': 'number', 'minimum': 1, 'description': "Seconds one candidate may take on the GPU tier, checks and timing included (default 600)."},
    },
    order=30,
)
