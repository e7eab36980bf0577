"""The jobs layer, below the features: a job's state and its one writer
(:mod:`.state`), the registry of running jobs (:mod:`.registry`), the worker threads and
the evaluation process that keep engine work off the server's loop and out of its GIL
(:mod:`.worker`), publishing a job's state to the client (:mod:`.publish`), running a job
(:mod:`.runner`) and writing a candidate into a buffer (:mod:`.edits`).

Nothing here imports a feature (``tests/server/test_layers.py`` checks it): features hear
about jobs through :class:`~.registry.JobHooks`.
"""

from autocomp.server.jobs.registry import JobHooks, JobRegistry
from autocomp.server.jobs.state import CANCELLED, FAILED, FINISHED, OPTIMIZE, RUNNING, TUNE, CandidateInfo, Job

__all__ = [
    "CANCELLED",
    "FAILED",
    "FINISHED",
    "OPTIMIZE",
    "RUNNING",
    "TUNE",
    "CandidateInfo",
    "Job",
    "JobHooks",
    "JobRegistry",
]
