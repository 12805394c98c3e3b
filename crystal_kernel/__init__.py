"""Crystal kernel: a coding agent that lives in Jupyter.

The agent host (everything here except :mod:`crystal_kernel.jupyter`) imports no
Jupyter library; the fronts (kernel, magics, CLI, server extension) render the one
typed event stream that :mod:`crystal_kernel.host.loop` produces.
"""

__version__ = "0.1.0"


# The shell is IPython's InteractiveShell, passed through: only the jupyter front may
# name Jupyter libraries, even for the type checker (the import contract counts it).
def load_ipython_extension(ipython: object) -> None:  # pragma: no cover - thin shim, tested via jupyter
    """`%load_ext crystal_kernel` registers the `%crystal` / `%%crystal` magics."""
    from crystal_kernel.jupyter.magics import load_ipython_extension as _load

    _load(ipython)


def unload_ipython_extension(ipython: object) -> None:  # pragma: no cover - thin shim, tested via jupyter
    """`%unload_ext crystal_kernel` removes the magics; the session's jobs stop."""
    from crystal_kernel.jupyter.magics import unload_ipython_extension as _unload

    _unload(ipython)
