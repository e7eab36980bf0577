"""A 2 MB document: kernel detection runs off the event loop (a separate process), edits
only shift what is known, and requests stay fast (issue 13, item 6)."""

from __future__ import annotations

import asyncio
import time

from lsp_harness import KERNEL, Editor

FILLER = "".join(f"// filler line {i:07d} of a big generated file ..........\n" for i in range(33_500))
BIG = FILLER + KERNEL  # just under autocomp.maxFileBytes (2,000,000)


async def _kernel_lines(ed: Editor, doc) -> list[int]:
    return [lens.range.start.line for lens in await ed.lenses(doc) if lens.command.title == "Optimize kernel"]


async def test_two_megabyte_document_is_scanned_off_the_loop_and_edits_shift(editor: Editor):
    assert 1_900_000 < len(BIG) < 2_000_000
    ed = editor
    doc = ed.open("big.kern", BIG)
    kernel_line = FILLER.count("\n") + 1
    lines: list[int] = []
    for _ in range(300):  # found by the background scan
        lines = await _kernel_lines(ed, doc)
        if lines:
            break
        await asyncio.sleep(0.05)
    assert lines == [kernel_line]
    # Typing above the kernel: every request answers at once, with the kernel moved.
    worst = 0.0
    for i in range(20):
        ed.insert(doc, 0, f"// typed line {i}\n")
        t0 = time.perf_counter()
        lines = await _kernel_lines(ed, doc)
        await ed.hover(doc, kernel_line + i + 2)
        worst = max(worst, time.perf_counter() - t0)
        assert lines == [kernel_line + i + 1], (i, lines)
    assert worst < 0.5, f"a request took {worst * 1000:.0f} ms on a 2 MB document"
    # The scan after the burst confirms the shifted position.
    await asyncio.sleep(1.0)
    assert await _kernel_lines(ed, doc) == [kernel_line + 20]
    hover = await ed.hover(doc, kernel_line + 21)
    assert hover is not None and "scale" in hover.contents.value
    assert not ed.messages()
