"""The tour notebooks: their workspaces, headless execution with nbclient, HTML renderings.

Each tour is a notebook in ``notebooks/`` with the cassette it replays in
``notebooks/cassettes/``. :func:`prepare` copies a tour into its own workspace folder
(the notebook's folder is the session's workspace), with its cassette at the default
place, ``.crystal/cassettes/default.json``, so that the replay provider finds it there
whether the notebook runs headless (``make demo``) or in JupyterLab (``make lab``).

:func:`execute` runs a notebook with nbclient. In the demo nobody is at the keyboard:
the Crystal kernel and the magics get ``--unattended`` and, under the replay provider,
the cassette's recorded person answers the question forms and approvals
(host/recorded_person.py). When recording, a :class:`PersonClient` clicks the answers
a person would (the cassette then stores them).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crystal_kernel.core import paths

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
CASSETTES = NOTEBOOKS / "cassettes"
KERNEL_TIMEOUT = 120  # seconds per cell; a replayed cell takes well under one


@dataclass(frozen=True)
class Tour:
    name: str  # notebooks/<name>.ipynb, notebooks/cassettes/<name>.json
    title: str
    files: tuple[tuple[str, str], ...] = ()  # (source relative to ROOT, destination in the workspace)

    @property
    def notebook(self) -> Path:
        return NOTEBOOKS / f"{self.name}.ipynb"

    @property
    def cassette(self) -> Path:
        return CASSETTES / f"{self.name}.json"


TOURS = (
    Tour("tour", "The Crystal kernel", (
        ("examples/sample-project/README.md", "README.md"),
        ("examples/sample-project/inventory.py", "inventory.py"),
        ("examples/sample-project/test_inventory.py", "test_inventory.py"),
        ("examples/tools/imagetools/tools.json", ".crystal/tools/imagetools/tools.json"),
        ("examples/tools/imagetools/imagetools.py", ".crystal/tools/imagetools/imagetools.py"),
    )),
    Tour("magics", "%crystal magics in a Python notebook"),
    Tour("notebook-tools", "Reading, fixing and re-running a notebook", (
        ("examples/analysis-notebook/analysis.ipynb", "analysis.ipynb"),
        ("examples/analysis-notebook/sales.csv", "sales.csv"),
    )),
    Tour("workbench", "Your Python beside the agent"),
)


def tour(name: str) -> Tour:
    for t in TOURS:
        if t.name == name:
            return t
    raise KeyError(name)


def prepare(t: Tour, workspace: Path, *, cassette: bool = True, keep_notebook: bool = False) -> Path:
    """A fresh workspace for ``t`` (its files, the notebook, the cassette); returns the notebook's path.

    ``keep_notebook``: a notebook already there (an executed one) is kept instead of the
    clean copy, so that it can be read and run again on fresh files.
    """
    notebook = workspace / t.notebook.name
    kept = notebook.read_bytes() if keep_notebook and notebook.is_file() else None
    if workspace.exists():
        shutil.rmtree(workspace)
    workspace.mkdir(parents=True)
    for source, dest in t.files:
        target = workspace / dest
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / source, target)
    if cassette:
        place = paths.default_cassette(workspace)
        place.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(t.cassette, place)
    if kept is not None:
        notebook.write_bytes(kept)
    else:
        shutil.copy2(t.notebook, notebook)
    return notebook


def write_home(home: Path, config: dict[str, Any]) -> Path:
    """Crystal's Home for a tour run: config.json with ``config``."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    return home


def write_kernelspec(folder: Path, flags: Sequence[str] = ()) -> Path:
    """Kernelspecs for this Python under ``folder``: ``crystal`` and ``python3`` (so that
    a ``python3`` kernelspec of another Python in the person's Jupyter folders, which
    would not have Crystal installed, is never picked). Returns ``folder``."""
    from crystal_kernel.jupyter.kernelspec import kernel_json

    python3 = {"argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
               "display_name": "Python 3 (ipykernel)", "language": "python", "metadata": {"debugger": True}}
    for name, spec in (("crystal", kernel_json(list(flags), python=sys.executable)), ("python3", python3)):
        (folder / name).mkdir(parents=True, exist_ok=True)
        (folder / name / "kernel.json").write_text(json.dumps(spec, indent=2), encoding="utf-8")
    return folder


def tour_env(home: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The kernel's environment: this Home, no stray provider settings from the caller's."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CRYSTAL_", "OPENAI_", "ANTHROPIC_")) and k != "JPY_SESSION_NAME"}
    env["CRYSTAL_HOME"] = str(home)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")
    # matplotlib draws PNGs inline and keeps its cache out of the person's Home.
    env.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    env["MPLCONFIGDIR"] = str(home / "matplotlib")
    env.update(extra or {})
    return env


def _client_class() -> type:
    from nbclient import NotebookClient

    class PersonClient(NotebookClient):
        """nbclient that clicks the Buttons named in ``answers``, in order, as they open:
        the person of a recording run."""

        answers: list[str] = []
        clicked: list[str] = []

        def on_comm_open_jupyter_widget(self, msg: dict[str, Any]) -> Any:
            state = msg["content"]["data"]["state"]
            kc = self.kc  # set while the notebook runs, which is when widgets open
            if (kc is not None and state.get("_model_name") == "ButtonModel" and self.answers
                    and state.get("description") == self.answers[0]):
                self.clicked.append(self.answers.pop(0))
                click = kc.session.msg("comm_msg", {"comm_id": msg["content"]["comm_id"],
                                                    "data": {"method": "custom", "content": {"event": "click"}}})
                kc.shell_channel.send(click)
            return super().on_comm_open_jupyter_widget(msg)

    return PersonClient


def execute(notebook: Path, env: dict[str, str], kernels: Path, *, answers: list[str] | None = None,
            clicked: list[str] | None = None) -> Any:
    """Run ``notebook`` in place (its folder is the workspace) and save it; returns the nbformat node.

    ``kernels`` holds the kernelspecs (:func:`write_kernelspec`), both for this Python.
    ``answers``: the Buttons a scripted person clicks, in order; each one clicked is
    appended to ``clicked``.
    Cell errors do not stop the run: every
    cell's outputs are saved, so a failure can be read in the notebook.
    """
    import nbformat
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import AsyncKernelManager

    nb = nbformat.read(notebook, as_version=4)
    name = nb.metadata.get("kernelspec", {}).get("name", "python3")
    km = AsyncKernelManager(kernel_name=name, kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(kernels)]))
    client = _client_class()(nb, km=km, timeout=KERNEL_TIMEOUT, allow_errors=True,
                             resources={"metadata": {"path": str(notebook.parent)}},
                             record_timing=False)
    client.answers = list(answers or [])
    client.clicked = clicked if clicked is not None else []
    env = dict(env, JPY_SESSION_NAME=str(notebook))
    # notebook_run starts kernels by kernelspec name: let it find these, for this Python.
    env["JUPYTER_PATH"] = os.pathsep.join(p for p in (str(kernels.parent), env.get("JUPYTER_PATH", "")) if p)
    # The kernel's own log (ipykernel's warnings, a flag error) goes to a file instead of
    # the terminal; a failure names it.
    log = kernel_log(notebook)
    with open(log, "w", encoding="utf-8") as stderr:
        try:
            client.execute(env=env, stderr=stderr)
        finally:
            nbformat.write(nb, notebook)
    return nb


def kernel_log(notebook: Path) -> Path:
    """Where :func:`execute` writes the kernel's log: beside the notebook's folder, not in
    it. The folder is the agent's workspace, and a file the demo made there would show
    up in what the agent lists (a tour's ``tree`` card)."""
    return notebook.parent.parent / f"{notebook.stem}.kernel.log"


def render_html(notebook: Path, target: Path) -> Path:
    """An HTML rendering of the saved notebook (nbconvert's lab template)."""
    import nbformat
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(template_name="lab")
    body, _ = exporter.from_notebook_node(nbformat.read(notebook, as_version=4))
    target.write_text(body, encoding="utf-8")
    return target


def error_outputs(nb: Any) -> list[str]:
    """Errors in an executed notebook: Python error outputs (``ename: evalue``) and
    Crystal's error lines (``Error: …``), with the cell they are in."""
    found = []
    for n, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
            if out.get("output_type") == "error":
                found.append(f"cell {n}: {out.get('ename')}: {out.get('evalue')}")
            text = str(out.get("data", {}).get("text/plain", ""))
            if text.startswith("Error: "):
                found.append(f"cell {n}: {text}")
    return found
