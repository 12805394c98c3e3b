"""papermill support: the Crystal parameter translator (docs/kernel.md, "Parameters and papermill").

``papermill in.ipynb out.ipynb -p target notes.md`` on a Crystal notebook injects a cell
of ``/parameter`` lines (``/parameter target "notes.md"``, the value as JSON): the
kernel sets each value, and later cells use it as ``{target}``
(:mod:`crystal_kernel.jupyter.parameters`). Nothing of it is sent to the model as a
prompt.

papermill (2.x) finds translators only in its own registry and loads no translator
entry points; it does load every ``papermill.engine`` entry point when it is imported.
So Crystal registers an engine, ``crystal`` (papermill's default nbclient engine,
unchanged), and importing this module registers the translator for the ``crystal``
kernel: installing crystal-kernel is enough, no ``--engine`` flag is needed.

Only papermill imports this module; the kernel never imports papermill.
"""

from __future__ import annotations

import json
from typing import Any

from papermill.engines import NBClientEngine
from papermill.models import Parameter
from papermill.translators import Translator, papermill_translators

from crystal_kernel.jupyter import parameters
from crystal_kernel.jupyter.kernelspec import KERNEL_NAME


class CrystalTranslator(Translator):
    """papermill parameters as Crystal ``/parameter NAME VALUE`` lines."""

    @classmethod
    def translate(cls, val: Any) -> str:
        # JSON for every value papermill gives (str, numbers, bool, None, lists, dicts);
        # anything else (a YAML date) as its text.
        return json.dumps(val, ensure_ascii=False, default=str)

    @classmethod
    def comment(cls, cmt_str: str) -> str:
        return ""  # a Crystal cell has no comments: a line of words would be a prompt

    @classmethod
    def assign(cls, name: str, str_val: str) -> str:
        parameters.check_name(name)  # papermill stops with the reason, before any cell runs
        return f"{parameters.COMMAND} {name} {str_val}"

    @classmethod
    def codify(cls, values: dict[str, Any], comment: str = "Parameters") -> str:
        return "".join(f"{cls.assign(name, cls.translate(value))}\n" for name, value in values.items())

    @classmethod
    def inspect(cls, parameters_cell: Any) -> list[Parameter]:
        """The ``/parameter`` lines of the cell tagged ``parameters`` (``papermill
        --help-notebook``)."""
        found: list[Parameter] = []
        for line in str(parameters_cell.source).splitlines():
            if not parameters.is_parameter_line(line):
                continue
            try:
                name, raw, value = parameters.parse_line(line)
            except Exception:
                continue  # inspection ignores lines it cannot read (papermill's contract)
            if name is not None and raw is not None:
                found.append(Parameter(name=name, inferred_type_name=type(value).__name__, default=raw, help=""))
        return found


class CrystalEngine(NBClientEngine):
    """papermill's nbclient engine; registered so that papermill imports this module."""


papermill_translators.register(KERNEL_NAME, CrystalTranslator)
