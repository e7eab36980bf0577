"""Pull the kernel code out of an LLM reply.

Replies wrap code in Markdown fences, often several (a snippet of the change, then the
whole kernel), sometimes with the wrong language tag, sometimes cut off. The rules:
closed fences only; prefer blocks tagged with the target's language, then blocks that
mention the kernel's name, then the longest. An unclosed last fence means the reply was
cut off, which is reported as such rather than compiled.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<tag>[\w+#.-]*)[^\n]*$", re.MULTILINE)


def language_aliases(language: str) -> set[str]:
    """The fence tags accepted for ``language``: what the targets declare (their
    ``TargetInfo.fences``), else the tag itself."""
    from autocomp.backends import fence_aliases

    return fence_aliases(language)


@dataclass
class Extraction:
    code: str | None
    problem: str = ""  # why no code was found, for the verdict's feedback


@dataclass
class _Block:
    tag: str
    body: str
    closed: bool


def _blocks(text: str) -> list[_Block]:
    blocks: list[_Block] = []
    pos = 0
    while True:
        opening = _FENCE.search(text, pos)
        if opening is None:
            break
        fence = opening.group("fence")
        closing_re = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$", re.MULTILINE)
        closing = closing_re.search(text, opening.end())
        if closing is None:
            blocks.append(_Block(opening.group("tag").lower(), text[opening.end() + 1 :], False))
            break
        body = text[opening.end() + 1 : closing.start()]
        blocks.append(_Block(opening.group("tag").lower(), body, True))
        pos = closing.end()
    return blocks


def extract_code(reply: str, language: str, kernel_name: str = "") -> Extraction:
    if not reply or not reply.strip():
        return Extraction(None, "no code in reply: the reply was empty")
    blocks = _blocks(reply)
    closed = [b for b in blocks if b.closed and b.body.strip()]
    if not closed:
        if blocks and not blocks[-1].closed:
            return Extraction(None, "no code in reply: the reply was cut off inside its code block (truncated)")
        return Extraction(None, "no code in reply: expected the whole kernel in a ``` fenced block")
    aliases = language_aliases(language)

    def score(block: _Block) -> tuple[int, int, int]:
        return (
            1 if block.tag in aliases else 0,
            1 if kernel_name and kernel_name in block.body else 0,
            len(block.body),
        )

    best = max(closed, key=score)
    code = best.body
    if not code.endswith("\n"):
        code += "\n"
    return Extraction(code)


def plan_text(reply: str) -> str:
    """A plan reply is prose; strip code fences the model added anyway and trim."""
    text = reply.strip()
    return text[:6000]
