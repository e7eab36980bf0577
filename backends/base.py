"""The one protocol every target implements (DESIGN principle 2: a target is data plus one
backend class).

A backend finds kernels in a file, turns one into a :class:`Problem`, evaluates batches of
candidate code against the problem's original kernel (the oracle), and names its primary
metric. Prompt text lives in ``prompts/<name>/`` and is loaded by :mod:`autocomp.prompts`.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Sequence

from autocomp.errors import UserError
from autocomp.model import Evaluation, KernelSpan, Problem

if TYPE_CHECKING:
    from autocomp.prompts import PromptPieces


class BackendError(UserError):
    """A problem the user must fix (no kernel found, missing toolchain, bad annotation).

    The message says what went wrong and what to do about it.
    """


@dataclass
class ToolCheck:
    """One line of ``autocomp doctor``: a piece of a target's toolchain."""

    name: str
    found: bool
    detail: str  # version or path when found, how to get it when not
    required: bool = True

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "found": self.found, "detail": self.detail, "required": self.required}


@dataclass
class TierInfo:
    """Which evaluator tier is active and whether its numbers may drive an automatic edit."""

    name: str
    confirms: bool
    note: str = ""


@dataclass(frozen=True)
class EditorLanguage:
    """One kind of editor buffer a target's kernels live in, as each client names it."""

    lsp: str  # the LSP / VS Code language id, e.g. "cuda-cpp"
    nvim: tuple[str, ...] = ()  # Neovim filetypes, e.g. ("cuda",)
    emacs: tuple[str, ...] = ()  # Emacs major modes, e.g. ("cuda-mode",)

    def to_json(self) -> dict[str, Any]:
        return {"lsp": self.lsp, "nvim": list(self.nvim), "emacs": list(self.emacs)}


@dataclass(frozen=True)
class TargetInfo:
    """Everything outside a target's own package needs to know about it, declared by the
    target itself (``backends/<name>/target.py`` defines ``TARGET = TargetInfo(...)``; a
    third-party package names its declaration in the ``autocomp.targets`` entry-point
    group; see ``docs/targets.md``). Cheap to import: no toolchain, no backend code.

    - ``backend``: ``"module:Class"`` of the :class:`Backend`, imported only when used.
    - ``title``: how prompts name the hardware ("the Gemmini systolic-array accelerator").
    - ``label``: how the UI names the kind of kernel ("Gemmini C").
    - ``summary``: what its kernels look like, for settings and docs ("C using the Gemmini API").
    - ``file_suffixes``: files that may hold a kernel (others are never scanned).
    - ``languages``: editor buffers that may hold a kernel (editors start the server for them).
    - ``fences``: code-fence tag -> the tags accepted for it in LLM replies (the prompt
      pieces' ``language`` picks the key).
    - ``device_resource``: the Ray resource one evaluation needs where a cluster has it.
    - ``settings``: ``autocomp.target.<name>.*`` as JSON-schema properties (key ->
      ``{"type": ..., "description": ...}``); ``settings_help`` introduces them.
    - ``detect_by_default``: part of the default ``autocomp.targets`` and of ``--target
      auto`` (test doubles say False, so they are used only when named).
    - ``order``: detection order (lower first: the more specific target wins a file).
    """

    name: str
    backend: str
    title: str
    label: str = ""
    summary: str = ""
    file_suffixes: tuple[str, ...] = ()
    languages: tuple[EditorLanguage, ...] = ()
    fences: dict[str, tuple[str, ...]] = field(default_factory=dict)
    device_resource: str | None = None
    settings: dict[str, dict[str, Any]] = field(default_factory=dict)
    settings_help: str = ""
    detect_by_default: bool = True
    order: int = 100

    def __hash__(self) -> int:  # dict fields: hash by name (names are unique in the registry)
        return hash(self.name)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "title": self.title,
            "label": self.label or self.name,
            "summary": self.summary,
            "fileSuffixes": list(self.file_suffixes),
            "languages": [lang.to_json() for lang in self.languages],
            "fences": {k: list(v) for k, v in self.fences.items()},
            "deviceResource": self.device_resource,
            "settings": self.settings,
            "detectByDefault": self.detect_by_default,
        }


class Backend(abc.ABC):
    """Base class for targets. Subclasses set the class attributes and implement
    :meth:`detect` and :meth:`evaluate`."""

    name: ClassVar[str]
    file_suffixes: ClassVar[tuple[str, ...]] = ()
    primary_metric: ClassVar[str]
    lower_is_better: ClassVar[bool] = True
    # Bumped whenever evaluation semantics change, so cached evaluations are not reused.
    evaluator_version: ClassVar[str] = "1"

    def __init__(self, settings: dict[str, Any] | None = None) -> None:
        # ``settings`` are ``autocomp.target.<name>.*`` from the editor or CLI (toolchain
        # paths, architecture, limits). Backends read what they know and ignore the rest.
        self.settings: dict[str, Any] = dict(settings or {})

    # -- finding kernels -------------------------------------------------------------
    @abc.abstractmethod
    def detect(self, path: str, text: str) -> list[KernelSpan]:
        """Kernels this target recognises in ``text``; empty when none. Must be fast
        (runs on every keystroke in the editor) and must never raise on odd input."""

    def make_problem(
        self,
        path: str,
        text: str,
        function: str | None = None,
        line: int | None = None,
        options: dict[str, Any] | None = None,
    ) -> Problem:
        """Pick one kernel: by name, else the one containing ``line``, else the only one."""
        spans = self.detect(path, text)
        if not spans:
            raise BackendError(f"{path}: no {self.name} kernel found. {self.detection_hint()}")
        chosen: KernelSpan | None = None
        if function is not None:
            chosen = next((s for s in spans if s.name == function), None)
            if chosen is None:
                names = ", ".join(s.name for s in spans)
                raise BackendError(f"{path}: no {self.name} kernel named {function!r}; found: {names}")
        elif line is not None:
            chosen = next((s for s in spans if s.contains_line(line)), None)
            if chosen is None:
                raise BackendError(f"{path}:{line + 1}: the cursor is not inside a kernel")
        elif len(spans) == 1:
            chosen = spans[0]
        else:
            names = ", ".join(s.name for s in spans)
            raise BackendError(f"{path}: several kernels ({names}); choose one with --function NAME")
        return Problem(path=path, span=chosen, file_text=text, options=dict(options or {}))

    def candidate_span(self, problem: Problem, path: str, text: str) -> KernelSpan:
        """Where the candidate code sits in a whole candidate file evaluated against
        ``problem`` (``autocomp eval FILE --against BASE``): by default, FILE's kernel of the
        same name. Targets whose candidate files have another layout override this."""
        return self.make_problem(path, text, function=problem.name).span

    def detection_hint(self) -> str:
        """One sentence telling the user what a kernel of this target looks like."""
        return ""

    # -- evaluation ------------------------------------------------------------------
    @abc.abstractmethod
    async def evaluate(self, problem: Problem, codes: Sequence[str]) -> list[Evaluation]:
        """Evaluate each code (a replacement for ``problem.span``) against
        ``problem.code``. Returns one Evaluation per code, in order. Runs candidates
        concurrently; each in its own process and directory with time and memory limits.
        Cancelling the awaiting task must kill every child process."""

    def prompt_pieces(self) -> "PromptPieces":
        """The target's prompt text, from ``prompts/<name>/`` (users may override files
        through ``AUTOCOMP_PROMPTS``)."""
        from autocomp.prompts import load_pieces

        return load_pieces(self.name)

    def prompt_context(self, problem: Problem) -> dict[str, str]:
        """Values that choose per-problem prompt text (``[[sections]]`` and
        ``[[conditional]]`` menu entries, ``$name`` in the description; see
        :mod:`autocomp.prompts`): ``file`` is the kernel file's text; targets add what their
        prompts depend on (e.g. the CUDA architecture compiled for)."""
        return {"file": problem.file_text}

    def headroom(self, problem: Problem, evaluation: Evaluation) -> str:
        """One line for the plan prompt saying how far this measured version is from a
        floor the hardware imposes (e.g. ideal compute cycles), or "" when the target
        cannot tell. Must be cheap and must not run candidate code."""
        return ""

    async def tunables(self, problem: Problem) -> Any:
        """The kernel's tunable integer constants as an :class:`autocomp.tuning.space.Space`
        (``autocomp tune``), or None. Default: ``find_space(problem, backend)`` (sync or async)
        of the target package's ``tunables`` module when it has one."""
        import importlib
        import importlib.util
        import inspect

        package = type(self).__module__.rpartition(".")[0]
        if not package or importlib.util.find_spec(f"{package}.tunables") is None:
            return None
        found = importlib.import_module(f"{package}.tunables").find_space(problem, self)
        return await found if inspect.isawaitable(found) else found

    def tier(self) -> TierInfo:
        """The evaluator tier that will be used on this machine."""
        return TierInfo(name=self.name, confirms=True)

    def doctor(self) -> list[ToolCheck]:
        """Each toolchain piece: found (with version/path) or how to install it."""
        return []

    def cache_identity(self) -> str:
        """Everything that changes an evaluation's outcome besides code and problem."""
        return f"{self.name}:{self.evaluator_version}:{sorted(self.settings.items())!r}"


_DIGESTS: dict[tuple, str] = {}


def sources_digest(root: str, folders: Sequence[str] = ("",), suffixes: Sequence[str] = (".py", ".toml")) -> str:
    """Hash of the evaluator's own files (``folders`` under ``root``, files ending in
    ``suffixes``): part of a backend's cache identity, so that a changed interpreter, cost
    model or simulator never serves evaluations cached by the old one. Computed once per
    process."""
    key = (root, tuple(folders), tuple(suffixes))
    digest = _DIGESTS.get(key)
    if digest is None:
        import hashlib
        import os

        h = hashlib.sha256()
        for folder in folders:
            path = os.path.join(root, folder)
            if not os.path.isdir(path):
                continue
            for name in sorted(os.listdir(path)):
                full = os.path.join(path, name)
                if os.path.isfile(full) and name.endswith(tuple(suffixes)):
                    with open(full, "rb") as f:
                        h.update(f"{folder}/{name}".encode() + b"\0" + f.read())
        digest = _DIGESTS[key] = h.hexdigest()[:16]
    return digest


@dataclass
class KernelInfo:
    """Summary of a detected kernel for listings (CLI ``--list``, server lenses)."""

    span: KernelSpan
    details: dict[str, Any] = field(default_factory=dict)
