"""The Crystal kernel's own process flags.

They come from the kernelspec's argv (after the kernel app's own arguments) and from
``CRYSTAL_ARGS`` (shell syntax); argv wins for single values and both add up for
repeatable ones. Besides the flags every front takes (FL-1 … FL-3, MODE-7 and the model
flags), the kernel takes:

- ``--workspace DIR``: the session's workspace (default: the kernel's folder, which
  Jupyter sets to the notebook's folder);
- ``--unattended``: nobody will answer widgets (batch runs with nbclient or papermill):
  the question tool is not offered and "ask" approvals resolve to deny;
- ``--ask-timeout SECONDS``: how long a question or approval form waits before it
  counts as dismissed (questions) or denied (approvals); default: as long as the turn.
"""

from __future__ import annotations

import argparse
import os
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn

from crystal_kernel.core.errors import UserError

if TYPE_CHECKING:
    from crystal_kernel.host.flags import ProcessFlags

ENV = "CRYSTAL_ARGS"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UserError(f"kernel flags: {message}")


def add_kernel_flags(p: argparse.ArgumentParser) -> None:
    """Every flag the kernel reads (also offered by ``crystal kernel install``)."""
    from crystal_kernel.host.flags import add_model_flags, add_process_flags, add_reasoning_flag

    add_process_flags(p)
    add_model_flags(p)
    add_reasoning_flag(p)
    p.add_argument("--workspace", metavar="DIR",
                   help="the session's workspace (default: the notebook's folder)")
    p.add_argument("--unattended", action="store_true",
                   help="nobody answers forms: asks are denied and questions not offered; under replay the "
                        "recording answers (default: a person answers)")
    p.add_argument("--ask-timeout", dest="ask_timeout", type=float, metavar="SECONDS",
                   help="how long a form waits for a person (default: personTimeoutSeconds, 3600)")


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="crystal-kernel", add_help=False)
    add_kernel_flags(p)
    return p


def to_argv(ns: argparse.Namespace) -> list[str]:
    """The kernel flags set in ``ns`` as an argument list (for a kernelspec's argv)."""
    out: list[str] = []
    for action in parser()._actions:
        if not action.option_strings:
            continue
        value = getattr(ns, action.dest, None)
        flag = action.option_strings[0]
        if isinstance(action, argparse._AppendAction):
            for item in value or []:
                out += [flag, str(item)]
        elif isinstance(action, argparse._StoreTrueAction):
            if value:
                out.append(flag)
        elif value is not None and value != action.default:
            out += [flag, str(value)]
    return out


@dataclass
class KernelOptions:
    namespace: argparse.Namespace | None = None
    workspace: str | None = None
    unattended: bool = False
    ask_timeout: float | None = None
    overrides: dict[str, Any] = field(default_factory=dict)

    def process_flags(self) -> ProcessFlags:
        from crystal_kernel.host.flags import ProcessFlags, flags_from_args

        if self.namespace is None:
            return ProcessFlags()
        return flags_from_args(self.namespace)


def parse(argv: Sequence[str], environ: Mapping[str, str] | None = None) -> tuple[KernelOptions, list[str]]:
    """Split Crystal's flags from the kernel app's; UserError for bad Crystal flags.

    Flags in CRYSTAL_ARGS must all be Crystal's; anything else there is refused.
    """
    from crystal_kernel.host.flags import overrides_from_args

    env: Mapping[str, str] = os.environ if environ is None else environ
    try:
        env_args = shlex.split(env.get(ENV, ""))
    except ValueError as exc:
        raise UserError(f"{ENV} cannot be parsed: {exc}.") from None
    p = parser()
    env_ns, unknown = p.parse_known_args(env_args)
    if unknown:
        raise UserError(f"{ENV}: unknown flags: {' '.join(unknown)}")
    ns, rest = p.parse_known_args(list(argv), namespace=env_ns)
    if ns.ask_timeout is not None and ns.ask_timeout <= 0:
        raise UserError("--ask-timeout must be a positive number of seconds.")
    if ns.prompt_attachments == "off" and ns.prompt_attachment:
        raise UserError("--prompt-attachment cannot be combined with --prompt-attachments off.")
    options = KernelOptions(namespace=ns, workspace=ns.workspace, unattended=ns.unattended,
                            ask_timeout=ns.ask_timeout, overrides=overrides_from_args(ns))
    return options, rest


def check(options: KernelOptions) -> None:
    """Refuse to start on flags that cannot work (MODE-7 unknown tool, FL-3 missing
    names). Cheap when no such flag is given."""
    ns = options.namespace
    if ns is None:
        return
    if ns.disable_tool:
        from crystal_kernel.tools.catalog import check_disabled

        check_disabled(ns.disable_tool)
    if ns.prompt_set or ns.prompt_attachment:
        from pathlib import Path

        from crystal_kernel.core.paths import home_dir
        from crystal_kernel.prompts.selection import check_prompt_flags

        workspace = Path(options.workspace or os.getcwd())
        check_prompt_flags(home_dir(), workspace, options.process_flags())
