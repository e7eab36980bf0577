"""TinyTargetDouble: a TEST DOUBLE of a fourth target, declared the way a third-party target
plugin declares itself (a module with ``TARGET``), to prove that adding a target needs
nothing outside its own package. Registered only by the tests that use it: in-process with
``autocomp.backends.register(TARGET)``, for a server subprocess through
``AUTOCOMP_PLUGINS=tiny_target_double`` (with this folder on ``PYTHONPATH``).

Its kernels are ``kernel NAME {`` blocks (as the scripted double's) in ``.tiny`` files;
replies fence code as ```` ```tiny ```` (or ```` ```tny ````).
"""

from __future__ import annotations

from autocomp.backends.base import EditorLanguage, TargetInfo
from autocomp.prompts import PromptPieces
from autocomp.testing.scripted_backend import ScriptedBackend

TITLE = "the Tiny test-double machine"

TARGET = TargetInfo(
    name="tiny",
    backend="tiny_target_double:TinyTargetDouble",
    title=TITLE,
    label="Tiny double",
    summary="`kernel NAME {` blocks in `.tiny` files (a test double)",
    file_suffixes=(".tiny",),
    languages=(EditorLanguage("tiny-lang", nvim=("tiny",), emacs=("tiny-mode",)),),
    fences={"tiny": ("tiny", "tny")},
    device_resource="tiny_device",
    settings={"speed": {"type": "number", "description": "How fast the tiny double pretends to be."}},
    settings_help="Tiny double settings (a test double of a target plugin).",
)

PIECES = PromptPieces(
    target="tiny",
    description="A made-up tiny machine for tests: lower `cost` is faster; `result` must not change.",
    menu=tuple(f"tiny option {i}: lower the cost by trick {i}" for i in range(1, 9)),
    rules="Keep `result` unchanged.",
    examples="(none)",
    language="tiny",
    noun="kernel",
)


class TinyTargetDouble(ScriptedBackend):
    name = "tiny"
    file_suffixes = (".tiny",)
    evaluator_version = "tiny-double-1"

    def prompt_pieces(self) -> PromptPieces:
        return PIECES

    def detection_hint(self) -> str:
        return "A tiny kernel is a `kernel NAME {` … `}` block in a .tiny file."
