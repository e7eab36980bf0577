"""The one exception the interpreter raises for kernel mistakes.

A constraint violation must tell the kernel author (human or LLM) exactly what to fix, so
every error carries the source location, the NKI call and the hardware limit it broke.
"""

from __future__ import annotations


class NkiError(Exception):
    """A kernel broke an NKI rule or a NeuronCore limit.

    ``kind`` is a short machine-readable tag (``partition-limit``, ``unwritten-read``, …);
    ``static`` marks misuse that a real compiler rejects before running (mixing API styles),
    which the harness reports as REJECTED rather than RUNTIME_ERROR.
    """

    def __init__(
        self,
        kind: str,
        message: str,
        *,
        call: str = "",
        limit: str = "",
        file: str = "",
        line: int = 0,
        static: bool = False,
    ) -> None:
        self.kind = kind
        self.message = message
        self.call = call
        self.limit = limit
        self.file = file
        self.line = line
        self.static = static
        super().__init__(self.render())

    def render(self) -> str:
        where = f"{self.file}:{self.line}: " if self.file else ""
        call = f"in {self.call}: " if self.call else ""
        limit = f" [limit: {self.limit}]" if self.limit else ""
        return f"{where}{call}{self.message}{limit}"

    def __str__(self) -> str:  # the location may be filled in after construction
        return self.render()

    def to_json(self) -> dict:
        return {
            "kind": self.kind,
            "message": self.message,
            "call": self.call,
            "limit": self.limit,
            "file": self.file,
            "line": self.line,
            "static": self.static,
        }
