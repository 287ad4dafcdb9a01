"""Plain-text tables for the query verbs: stable columns that read well in a terminal and a pipe."""

from __future__ import annotations

from typing import Any, Sequence


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], max_width: int = 48) -> str:
    """Left-aligned columns two spaces apart; cells longer than ``max_width`` are cut with '...'."""
    cells = [[_cell(c, max_width) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells]
    return "\n".join(lines)


def _cell(value: Any, max_width: int) -> str:
    text = " ".join(str("" if value is None else value).split())
    return text if len(text) <= max_width else text[: max_width - 3] + "..."
