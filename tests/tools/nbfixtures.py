"""Notebooks for the notebook tool tests, written by nbformat itself (indent 1, sorted
keys: what Jupyter writes)."""

from __future__ import annotations

import base64
import struct
import zlib
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output


def png_bytes(width: int = 2, height: int = 2) -> bytes:
    """A real, tiny PNG (red pixels)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    raw = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


ANSI_TRACEBACK = [
    "\x1b[0;31m---------------------------------------------------------------------------\x1b[0m",
    "\x1b[0;31mZeroDivisionError\x1b[0m                         Traceback (most recent call last)",
    "Cell \x1b[0;32mIn[2], line 1\x1b[0m\n\x1b[0;32m----> 1\x1b[0m \x1b[38;5;241m1\x1b[39m\x1b[38;5;241m/\x1b[39m\x1b[38;5;241m0\x1b[39m",
    "\x1b[0;31mZeroDivisionError\x1b[0m: division by zero",
]


def analysis_notebook() -> nbformat.NotebookNode:
    nb = new_notebook(metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
        "custom_tool": {"keep": [1, 2]},
    })
    png = base64.b64encode(png_bytes()).decode()
    nb.cells = [
        new_markdown_cell("# Sales analysis\nTotals per region."),
        new_code_cell("rows = [3, 4, 5]\nprint(sum(rows))",
                      outputs=[new_output("stream", name="stdout", text="12\n")], execution_count=1),
        new_code_cell("1/0", outputs=[new_output("error", ename="ZeroDivisionError", evalue="division by zero",
                                                 traceback=ANSI_TRACEBACK)], execution_count=2),
        new_code_cell("plot()", outputs=[new_output("display_data", data={"image/png": png, "text/plain": "<Figure>"})],
                      execution_count=3),
        new_code_cell("rows", outputs=[new_output("execute_result", data={"text/plain": "[3, 4, 5]"},
                                                  execution_count=4)], execution_count=4),
    ]
    nb.cells[1].metadata["tags"] = ["parameters"]
    nb.cells[1].metadata["vendor"] = {"x": "y"}
    return nb


def write(path: Path, nb: nbformat.NotebookNode) -> str:
    nbformat.write(nb, str(path))
    return path.read_text(encoding="utf-8")
