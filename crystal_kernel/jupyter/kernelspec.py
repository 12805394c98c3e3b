"""The ``crystal`` kernelspec: its kernel.json and its installation.

``interrupt_mode`` is ``message``: the stop button reaches the kernel as an
``interrupt_request`` on the control channel, and no SIGINT hits the kernel's children
(DESIGN.md). Crystal's process flags can be baked into argv, so a person can install a
kernelspec with, for example, a forced prompt set (FL-1). The kernelspec carries Crystal's
logo (``logo-svg.svg``, ``logo-64x64.png``, ``logo-32x32.png``), which JupyterLab's
launcher shows on the kernel's tiles.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

KERNEL_NAME = "crystal"
DISPLAY_NAME = "Crystal"
#: The kernelspec's logo files, named as Jupyter expects them.
LOGOS = tuple(sorted((Path(__file__).parent / "logo").glob("logo-*")))


#: ``python -c`` code that runs the module named by its first argument as ``python -m``
#: would, but with the current folder taken off ``sys.path`` before anything is imported
#: (TRUST-2): Jupyter starts a kernel, and Jupyter AI the ACP agent, in the notebook's or
#: chat's folder, and a cloned repository there holding ``crystal_kernel/`` or
#: ``pluggy.py`` must not be imported instead of the installed package. (``-P`` does
#: this from Python 3.11 on; Crystal supports 3.10.)
SAFE_LAUNCH = ("import sys; sys.path[:1] == [''] and sys.path.pop(0); import runpy; "
               "runpy.run_module(sys.argv.pop(1), run_name='__main__', alter_sys=True)")


def module_argv(python: str, module: str) -> list[str]:
    """``[python, -c, SAFE_LAUNCH, module]``: ``python -m module`` without the current
    folder on ``sys.path`` (TRUST-2)."""
    return [python, "-c", SAFE_LAUNCH, module]


def kernel_json(flags: Sequence[str] = (), *, display_name: str = DISPLAY_NAME,
                python: str | None = None) -> dict[str, Any]:
    argv = [*module_argv(python or sys.executable, "crystal_kernel.jupyter"), "-f", "{connection_file}", *flags]
    return {
        "argv": argv,
        "display_name": display_name,
        "language": "markdown",
        "interrupt_mode": "message",
        # The lab extension recognises a Crystal kernel by this, whatever its name
        # (labextension/src/kernelspec.ts).
        "metadata": {"debugger": False, "crystal": True},
    }


def write_kernelspec(folder: Path, spec: dict[str, Any]) -> None:
    """Write ``spec`` as ``folder``/kernel.json with Crystal's logo files beside it."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "kernel.json").write_text(json.dumps(spec, indent=2), encoding="utf-8")
    for logo in LOGOS:
        shutil.copyfile(logo, folder / logo.name)


def install(*, user: bool = False, prefix: str | None = None, name: str = KERNEL_NAME,
            display_name: str = DISPLAY_NAME, flags: Sequence[str] = ()) -> str:
    """Install the kernelspec; returns the folder it was installed in."""
    from jupyter_client.kernelspec import KernelSpecManager

    from crystal_kernel.core.host_folders import process_folder, remove_folder
    from crystal_kernel.core.paths import home_dir

    # SANDBOX-2: written first in a host-only folder, not temp, where a tool process
    # could rewrite the argv between the write and the copy.
    staging = process_folder(home_dir(), "install")
    try:
        folder = staging / name
        write_kernelspec(folder, kernel_json(flags, display_name=display_name))
        return KernelSpecManager().install_kernel_spec(str(folder), name, user=user, prefix=prefix)
    finally:
        remove_folder(staging)
