"""``crystal kernel install [--user | --sys-prefix | --prefix DIR]`` (SPEC §11).

Without a location flag the kernelspec goes to the user's Jupyter folder (no root
needed). Crystal's process flags after the location are baked into the kernelspec's
argv (``crystal kernel install --user --prompt-set strict --name crystal-strict``) and
checked first with the kernel's own checks: a bad flag installs nothing.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from crystal_kernel.core.errors import UserError
from crystal_kernel.core.textsafe import terminal_safe


def add_subparsers(sub: Any) -> None:
    kernel = sub.add_parser("kernel", help="the Crystal Jupyter kernel")
    ksub = kernel.add_subparsers(dest="kernel_command", parser_class=type(kernel), required=True)
    install = ksub.add_parser("install", help="install the kernelspec named crystal")
    where = install.add_mutually_exclusive_group()
    where.add_argument("--user", action="store_true", help="the user's Jupyter folder (the default)")
    where.add_argument("--sys-prefix", dest="sys_prefix", action="store_true", help="this Python's prefix")
    where.add_argument("--prefix", metavar="DIR", help="PREFIX/share/jupyter/kernels")
    install.add_argument("--name", default="crystal", help="kernelspec name (default: crystal)")
    install.add_argument("--display-name", dest="display_name", default="Crystal",
                         help="the name the launcher and the kernel picker show (default: Crystal)")
    install.set_defaults(handler=cmd_install)
    # Crystal's own kernel flags (FL-*, MODE-7, model flags), baked into argv.
    from crystal_kernel.jupyter.options import add_kernel_flags

    add_kernel_flags(install)


def check_flags(options: Any) -> None:
    """Refuse now what the kernel would refuse later, with the kernel's own checks: the
    config values the flags set (approval, mode, model settings; the session refuses
    them at the first cell) and the start-up check (``--disable-tool`` names, a forced
    ``--prompt-set`` or ``--prompt-attachment`` that is not discovered). Attachments are
    looked up in Home and in ``--workspace``, or the current folder without it."""
    import tempfile
    from pathlib import Path

    from crystal_kernel.core.config import load_config
    from crystal_kernel.jupyter.options import check

    # Only the flags' values: the config file and CRYSTAL_* variables are not baked in.
    with tempfile.TemporaryDirectory() as empty:
        load_config(home=Path(empty), overrides=options.overrides, environ={})
    check(options)


def cmd_install(ns: argparse.Namespace) -> int:
    from jupyter_client.kernelspec import _is_valid_kernel_name

    from crystal_kernel.jupyter.kernelspec import install
    from crystal_kernel.jupyter.options import parse, to_argv

    flags = to_argv(ns)
    if not _is_valid_kernel_name(ns.name):
        raise UserError(f"--name '{ns.name}' is not a valid kernelspec name (letters, digits, '.', '_', '-').")
    options, rest = parse(flags, environ={})
    if rest:
        raise UserError(f"Unknown kernel flags: {' '.join(rest)}")
    check_flags(options)
    prefix = sys.prefix if ns.sys_prefix else ns.prefix
    try:
        path = install(user=prefix is None, prefix=prefix, name=ns.name, display_name=ns.display_name,
                       flags=flags)
    except OSError as exc:
        raise UserError(f"Cannot install the kernelspec: {exc.strerror or exc}.") from None
    print(terminal_safe(f"Installed kernelspec {ns.name} in {path}"))
    shadow = shadowing_spec(ns.name, path)
    if shadow:
        print(terminal_safe(f"crystal: warning: Jupyter here uses another kernelspec named '{ns.name}' in {shadow}, "
                            f"which takes precedence over the one just installed; update that one (for a virtual "
                            f"environment: crystal kernel install --sys-prefix) or install under another --name."),
              file=sys.stderr)
    return 0


def shadowing_spec(name: str, installed: str) -> str | None:
    """The folder of the kernelspec ``name`` that Jupyter of this Python finds first, when
    it is not ``installed``. In a virtual environment Jupyter prefers the environment's
    specs over the user's (``JUPYTER_PREFER_ENV_PATH``), so after ``make demo`` a
    ``--user`` install is silently hidden by the venv's own ``crystal`` spec."""
    import os

    from jupyter_client.kernelspec import KernelSpecManager

    try:
        manager = KernelSpecManager()
        searched = {os.path.realpath(d) for d in manager.kernel_dirs}
        found = manager.find_kernel_specs().get(name)
    except Exception:  # a broken Jupyter path is not the install's problem
        return None
    if os.path.realpath(os.path.dirname(installed)) not in searched:
        return None  # --prefix for another environment's Jupyter: not this one's business
    if found is None or os.path.realpath(found) == os.path.realpath(installed):
        return None
    return found
