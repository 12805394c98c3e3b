"""`make demo`: the product's main job, offline.

1. The CLI tour: copies the sample project to build/demo/project and runs
   ``crystal run`` on it with the replay provider and examples/cassettes/cli-tour.json.
2. The notebook tours (notebooks/tour.ipynb, notebooks/notebook-tools.ipynb and
   notebooks/workbench.ipynb in the Crystal kernel, notebooks/magics.ipynb in a Python kernel): each is copied into its own workspace under build/demo/ with its
   cassette, executed headlessly with nbclient, saved, and rendered to HTML.

The model's replies are recorded; every tool runs for real on real files. Nobody is at
the keyboard, so the kernel runs ``--unattended`` and the recorded person's answers in
the cassettes answer the question form and the approvals. Needs no API key and no
network. ``python -m crystal_kernel.demo --prepare`` only lays out fresh workspaces;
``python -m crystal_kernel.demo --lab [JUPYTER LAB FLAGS]`` lays them out and serves them
in JupyterLab (``make lab``): see :func:`run_lab`.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from crystal_kernel.core import paths

ROOT = Path(__file__).resolve().parents[1]
# $CRYSTAL_DEMO_BUILD moves the output elsewhere (tests write into a temporary folder).
BUILD = Path(os.environ.get("CRYSTAL_DEMO_BUILD") or ROOT / "build" / "demo").resolve()
PROMPT = "One of the tests in this project fails. Find out why and fix it."
#: config.json of the demo's Crystal Home: the replay provider, named after the recorded model.
DEMO_CONFIG = {"provider": "replay", "model": "gpt-4.1"}


def _rel(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def run_cli_tour() -> int:
    project = BUILD / "project"
    if project.exists():
        shutil.rmtree(project)
    shutil.copytree(ROOT / "examples" / "sample-project", project)
    home = BUILD / "home"
    home.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, CRYSTAL_HOME=str(home), CRYSTAL_PROVIDER="replay",
               CRYSTAL_CASSETTE=str(ROOT / "examples" / "cassettes" / "cli-tour.json"))
    for var in ("CRYSTAL_MODEL", "CRYSTAL_BASE_URL", "CRYSTAL_API_KEY_ENV", "CRYSTAL_APPROVAL", "CRYSTAL_ARGS"):
        env.pop(var, None)
    crystal = Path(sys.executable).parent / "crystal"
    print(f"$ crystal run {PROMPT!r} --workspace {_rel(project)} --approval full\n", flush=True)
    code = subprocess.call([str(crystal), "run", PROMPT, "--workspace", str(project), "--approval", "full"], env=env)
    if code != 0:
        print(f"\nThe CLI tour failed (exit {code}).", file=sys.stderr)
        return code
    check = subprocess.run([sys.executable, "-m", "unittest", "-q"], cwd=project, capture_output=True, text=True)
    print("\nThe sample project's tests after the agent's fix:", "pass" if check.returncode == 0 else "FAIL")
    sessions = sorted(paths.sessions_dir(project).glob("*.jsonl"))
    if sessions:
        print(f"The session journal: {_rel(sessions[-1])}")
    return check.returncode


def prepare_tours(keep_notebooks: bool = False) -> list[Path]:
    """Fresh workspaces build/demo/<tour>/ with the notebook and its cassette; a Home
    whose config selects the replay provider. Returns the notebooks.

    ``keep_notebooks``: executed notebooks already there stay (``make lab``)."""
    from crystal_kernel.core.trust import trust_all
    from crystal_kernel.jupyter.tours import TOURS, prepare, write_home

    write_home(BUILD / "home", DEMO_CONFIG)
    notebooks = [prepare(t, BUILD / t.name, keep_notebook=keep_notebooks) for t in TOURS]
    # The person ran the demo: the tours' own exec set (imagetools) is trusted in the
    # demo's Home (TRUST-2), as `crystal trust` would.
    for t in TOURS:
        trust_all(BUILD / "home", BUILD / t.name)
    return notebooks


def run_notebook_tours() -> int:
    """Execute both tours headlessly (nbclient), save them, render HTML next to them."""
    from crystal_kernel.jupyter.tours import (
        error_outputs,
        execute,
        kernel_log,
        render_html,
        tour_env,
        write_kernelspec,
    )

    notebooks = prepare_tours()
    kernels = write_kernelspec(BUILD / "kernels")
    env = tour_env(BUILD / "home", {"CRYSTAL_ARGS": "--unattended"})
    failed = 0
    for notebook in notebooks:
        started = time.monotonic()
        print(f"\nRunning {_rel(notebook)} ...", flush=True)
        nb = execute(notebook, env, kernels)
        html = render_html(notebook, BUILD / f"{notebook.stem}.html")
        problems = error_outputs(nb)
        for problem in problems:
            print(f"  {problem}", file=sys.stderr)
        if problems:
            print(f"  (the kernel's log: {_rel(kernel_log(notebook))})", file=sys.stderr)
        failed += bool(problems)
        state = "with errors" if problems else "ok"
        print(f"  {state} in {time.monotonic() - started:.1f} s: {_rel(notebook)}, {_rel(html)}", flush=True)
    return 1 if failed else 0


def closing_list() -> str:
    """What the demo wrote, one file per line, the descriptions in one column."""
    rows = [
        (BUILD / "tour.html", "the Crystal kernel tour (open it in a browser)"),
        (BUILD / "magics.html", "the %crystal magics tour"),
        (BUILD / "notebook-tools.html", "the notebook tools tour"),
        (BUILD / "workbench.html", "your own %%python cells beside the agent"),
        (BUILD / "tour" / "tour.ipynb", "the executed kernel tour, in its workspace"),
        (BUILD / "magics" / "magics.ipynb", "the executed magics tour"),
        (BUILD / "notebook-tools" / "analysis.ipynb", "the analysis notebook the agent fixed"),
        (BUILD / "project", "the sample project the CLI tour fixed"),
    ]
    names = [_rel(path) + ("/" if path.suffix == "" else "") for path, _ in rows]
    width = max(len(name) for name in names)
    lines = [f"  {name.ljust(width)}   {what}" for name, (_, what) in zip(names, rows)]
    return (f"\nDone. Everything the demo wrote is in {_rel(BUILD)}/:\n" + "\n".join(lines) + "\n"
            "Open them in JupyterLab with `make lab` (it resets the workspaces so you can run them again).")


def lab_command(extra: list[str]) -> list[str]:
    """``jupyter lab`` on the tour workspaces. The collaboration extension's document
    store goes under build/ (by default it creates ``.jupyter_ystore.db`` in the current
    folder, which for ``make lab`` is the repository)."""
    jupyter = Path(sys.executable).parent / "jupyter"
    return [str(jupyter), "lab", f"--notebook-dir={BUILD}",
            f"--SQLiteYStore.db_path={BUILD / '.jupyter_ystore.db'}", *extra]


def run_lab(extra: list[str]) -> int:
    """Serve the tours in JupyterLab until SIGINT or SIGTERM, also without a terminal.

    ``make lab`` run in the background of a script (no terminal) inherits SIGINT as
    ignored, and JupyterLab only asks "Shutdown this server?" on a terminal: a SIGINT
    then did nothing. Here both signals are handled: JupyterLab gets SIGTERM, its own
    clean stop, and this process waits for it and exits."""
    for notebook in prepare_tours(keep_notebooks=True):
        print(f"Fresh workspace for {_rel(notebook)}", flush=True)
    env = dict(os.environ, CRYSTAL_HOME=str(BUILD / "home"))
    on_terminal = bool(sys.stdin) and sys.stdin.isatty()
    # On a terminal JupyterLab gets Ctrl-C itself and asks whether to shut down. Without
    # one, SIGINT reaches it only through this process, as SIGTERM: a SIGINT to the whole
    # process group (kill -INT -PGID) hung JupyterLab's shutdown when it got both.
    # Without a terminal it also gets a process group of its own, so that a signal to
    # this group (kill -TERM -PGID) reaches it once, from here: two SIGTERMs hung it too.
    def in_child() -> None:
        if on_terminal:
            signal.signal(signal.SIGINT, signal.SIG_DFL)
        else:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            os.setpgid(0, 0)

    child = subprocess.Popen(lab_command(extra), env=env, preexec_fn=in_child)
    stopping: list[int] = []

    def stop(signum: int, _frame: object) -> None:
        if signum == signal.SIGINT and on_terminal:
            return  # Ctrl-C reached JupyterLab too, which asks whether to shut down
        stopping.append(signum)
        if child.poll() is None:
            child.terminate()

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    code = child.wait()  # a signal's handler runs meanwhile; wait goes on after it
    return 0 if stopping else code


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    BUILD.mkdir(parents=True, exist_ok=True)
    if args[:1] == ["--lab"]:
        return run_lab(args[1:])
    if "--prepare" in args:
        for notebook in prepare_tours(keep_notebooks=True):
            print(f"Fresh workspace for {_rel(notebook)}")
        return 0
    code = 0 if "--notebooks-only" in args else run_cli_tour()
    if code == 0:
        code = run_notebook_tours()
    if code == 0:
        print(closing_list())
    return code


if __name__ == "__main__":
    sys.exit(main())
