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
    },
    order=30,
)
