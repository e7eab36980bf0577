"""The one re-anchoring rule: where a result computed for a kernel goes in today's text.

The CLI (``--write``) and the server (auto-apply, "Apply this candidate") both put a new
kernel into a file that may have changed since the search started. They use this rule, and
only this rule:

1. **Unchanged, in place.** The text that was optimized still stands at its old lines:
   replace those lines.
2. **Moved.** The user edited elsewhere, so that exact text now starts on another line:
   replace the whole-line occurrence nearest its old place (the earlier one on a tie).
3. **Edited inside.** The kernel itself was edited (the caller found it again, by name, at
   ``current``): the user's edit and the candidate's changes are merged line by line
   against the optimized text (a three-way merge). Where they touch different lines the
   merge keeps both; where they touch the same lines nothing is written and
   :class:`Conflict` says which lines of the file and of the candidate collide.
4. Otherwise (the kernel is gone or renamed) nothing is written either.

Everything works on whole lines: a kernel always spans whole lines (``KernelSpan``).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from autocomp.errors import UserError


class Conflict(UserError):
    """The new kernel cannot be placed; the message says exactly why (for the user)."""


@dataclass(frozen=True)
class Placement:
    """Replace lines ``[start, end)`` of the current text with ``text``. ``merged`` says
    whether the user's own edits inside the kernel were kept (rule 3)."""

    start: int
    end: int
    text: str
    merged: bool = False


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def _fit_ending(old: str, new: str) -> str:
    """Keep whether the replaced block ended with a newline (a file's last line may not)."""
    if old.endswith("\n") and new and not new.endswith("\n"):
        return new + "\n"
    if old and not old.endswith("\n") and new.endswith("\n"):
        return new.rstrip("\r\n")
    return new


def find_moved(text: str, original: str, start: int) -> int | None:
    """Rules 1–2: the line where ``original`` stands as whole lines, nearest ``start``."""
    if not original:
        return None
    lines = _lines(text)
    n = len(_lines(original))
    if "".join(lines[start : start + n]) == original:
        return start
    offsets: dict[int, int] = {}
    offset = 0
    for i, line in enumerate(lines):
        offsets[offset] = i
        offset += len(line)
    starts: list[int] = []
    pos = text.find(original)
    while pos != -1:
        if pos in offsets:
            starts.append(offsets[pos])
        pos = text.find(original, pos + 1)
    if not starts:
        return None
    return min(starts, key=lambda s: (abs(s - start), s))


def _hunks(base: list[str], other: list[str]) -> list[tuple[int, int, list[str]]]:
    matcher = difflib.SequenceMatcher(None, base, other, autojunk=False)
    return [(i1, i2, other[j1:j2]) for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"]


def _collide(a: tuple[int, int, list[str]], b: tuple[int, int, list[str]]) -> bool:
    a1, a2, _ = a
    b1, b2, _ = b
    if a1 == a2 and b1 == b2:  # two insertions at one place: which goes first is unknown
        return a1 == b1
    if a1 == a2:  # an insertion collides with a change it falls strictly inside
        return b1 < a1 < b2
    if b1 == b2:
        return a1 < b1 < a2
    return a1 < b2 and b1 < a2


def merge3(base: str, mine: str, theirs: str) -> str:
    """Line-based three-way merge of ``mine`` (the user's kernel) and ``theirs`` (the
    candidate), both derived from ``base``; raises Conflict naming the lines that collide
    (1-based lines of ``base``, the kernel as it was optimized)."""
    b = _lines(base)
    user = _hunks(b, _lines(mine))
    cand = _hunks(b, _lines(theirs))
    for u in user:
        for c in cand:
            if u == c:
                continue
            if _collide(u, c):
                def where(h: tuple[int, int, list[str]]) -> str:
                    lo, hi = h[0] + 1, max(h[0], h[1] - 1) + 1
                    return f"kernel line {lo}" if lo == hi else f"kernel lines {lo}–{hi}"

                raise Conflict(
                    f"your edit at {where(u)} and the candidate's change at {where(c)} (counting from the kernel's "
                    "first line as it was optimized) touch the same lines"
                )
    hunks = sorted({(h[0], h[1], tuple(h[2])) for h in user + cand}, key=lambda h: (h[0], h[1]))
    out: list[str] = []
    at = 0
    for i1, i2, new in hunks:
        out += b[at:i1]
        out += list(new)
        at = max(at, i2)
    out += b[at:]
    return "".join(out)


def place(
    text: str,
    original: str,
    start: int,
    new_code: str,
    current: tuple[int, int] | None = None,
    name: str = "the kernel",
) -> Placement:
    """Where (and what) to write so ``new_code`` replaces the kernel that was ``original``
    at line ``start``; ``current`` is the kernel's lines in ``text`` as found again by name
    (for rule 3). Raises Conflict with the reason."""
    at = find_moved(text, original, start)
    lines = _lines(text)
    if at is not None:
        end = at + len(_lines(original))
        return Placement(at, end, _fit_ending("".join(lines[at:end]), new_code))
    if current is None:
        raise Conflict(f"{name} is no longer in the file (renamed or deleted), so there is nothing to replace")
    c_start, c_end = current
    mine = "".join(lines[c_start:c_end])
    merged = merge3(original, mine, new_code if new_code.endswith("\n") or not original.endswith("\n") else new_code + "\n")
    return Placement(c_start, c_end, _fit_ending(mine, merged), merged=True)


def apply_placement(text: str, placement: Placement) -> str:
    lines = _lines(text)
    return "".join(lines[: placement.start]) + placement.text + "".join(lines[placement.end :])
