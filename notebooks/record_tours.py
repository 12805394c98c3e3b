"""Author the tour notebooks and record their cassettes: a scripted model run, recorded once.

For each tour this script writes the notebook (``notebooks/<name>.ipynb``) from the
cells below, then runs it for real: the model's replies, written here by hand to read
like a real model's work, are served by the loopback model server (OpenAI Chat
Completions protocol) while the kernel records every interaction to
``notebooks/cassettes/<name>.json`` (``"record": true``). A scripted person clicks the
answers to the question form and the approvals; the recording keeps them next to the
reply that asked (the ``person`` key), so that ``make demo`` can replay the whole tour
offline with nobody at the keyboard. Every tool runs for real in both runs.

    .venv/bin/python notebooks/record_tours.py [tour|magics ...]
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import nbformat
from nbclient.exceptions import CellTimeoutError

from crystal_kernel.core.trust import trust_all
from crystal_kernel.jupyter.tours import (
    error_outputs, execute, kernel_log, prepare, tour, tour_env, write_home, write_kernelspec,
)
from crystal_kernel.testing.llm_server import LLMServer

HERE = Path(__file__).resolve().parent
MODEL = "gpt-4.1"
KEY_ENV = "CRYSTAL_RECORDING_KEY"

# ----- the Crystal kernel tour -----------------------------------------------------------------

OLD = "        total += item.price\n"
NEW = "        total += item.price * item.quantity\n"

WHICH_FIX = {
    "header": "Which fix",
    "question": "`test_total_value` expects 64.0 (price × quantity) but `total_value` returns 34.75 "
                "(unit prices only). Which one is right?",
    "options": [
        {"label": "Fix the code", "description": "total_value counts the quantity in stock; the test stays (recommended)"},
        {"label": "Fix the test", "description": "total_value stays a sum of unit prices; the test expects 34.75"},
    ],
}

PLAN_TODOS = [
    {"content": "Add export_csv(items, path) to inventory.py using csv.writer (name, price, quantity, value)",
     "status": "pending"},
    {"content": "Write the header row and round value to 2 decimals, like total_value", "status": "pending"},
    {"content": "Add test_export_csv to test_inventory.py: export STOCK to a temp file and read it back",
     "status": "pending"},
    {"content": "Mention the export in README.md", "status": "pending"},
]

TOUR: list[dict[str, Any]] = [
    {"markdown": "# A tour of Crystal\n\n"
                 "This notebook runs in the **Crystal** kernel: every code cell is a message to the agent, and "
                 "a cell that starts with `/` is a command (`/help` lists them). The notebook's folder is the "
                 "agent's workspace; here it holds a tiny inventory module and its tests.\n\n"
                 "`make demo` runs this notebook on the *replay* provider: the model's replies come from a "
                 "recording (`.crystal/cassettes/default.json`), but every tool call — reading files, running "
                 "tests, editing code, drawing a chart — really happens, in this folder. "
                 "Nobody is at the keyboard during `make demo`, so the person's answers to the question form "
                 "and the approvals come from the recording too."},
    {"markdown": "## Exploring a project\n\nAsk about the code the way you would ask a colleague. "
                 "Each tool call shows up as a card: the tool, its main argument, and its result."},
    {"code": "What is in this project? Give me a short tour.",
     "replies": [
         {"text": "I'll start with the layout of the workspace.",
          "tool_calls": [{"id": "call_tree", "name": "tree", "arguments": {}}]},
         {"text": "A small Python project: one module and its tests. Let me read both.",
          "tool_calls": [{"id": "call_read_module", "name": "read", "arguments": {"path": "inventory.py"}},
                         {"id": "call_read_tests", "name": "read", "arguments": {"path": "test_inventory.py"}}]},
         {"text": "This is a tiny inventory library with a unit-test suite:\n\n"
                  "| file | what it holds |\n| --- | --- |\n"
                  "| `inventory.py` | an `Item` dataclass (`name`, `price`, `quantity`) and two functions |\n"
                  "| `test_inventory.py` | two `unittest` tests over a three-item `STOCK` |\n"
                  "| `README.md` | how to run the tests |\n\n"
                  "- **`total_value(items)`** should return the value of everything in stock, rounded to cents.\n"
                  "- **`low_stock(items, threshold=3)`** returns the sorted names of items below the threshold.\n\n"
                  "One thing stands out already: `total_value` adds `item.price` but never looks at "
                  "`item.quantity`, while its docstring talks about *everything in stock*. The tests will tell "
                  "us whether that is intended."},
     ]},
    {"markdown": "## Background jobs\n\nLong-running commands go to the background: the agent gets a job id at "
                 "once, the work goes on, and the agent reads the output when it needs it. `/jobs` lists the "
                 "session's jobs and `/logs JOB` shows a job's output."},
    {"code": "Run the test suite as a background job.",
     "answers": ["Allow once"],
     "replies": [
         {"text": "Starting the tests in the background.",
          "tool_calls": [{"id": "call_job", "name": "bash_start",
                          "arguments": {"command": "python3 -m unittest -v"}}]},
         {"text": "The test run is job **j1** (`python3 -m unittest -v`). It runs on its own, so we can keep "
                  "working; `/jobs` shows its state and I can read its log whenever you like."},
     ]},
    {"code": "/jobs"},
    {"markdown": "## Tools that return images\n\nWhile the tests run, something else. This workspace has an "
                 "*exec tool set* installed in "
                 "`.crystal/tools/imagetools/` (the example from `examples/tools/imagetools`): three tools that "
                 "run as a child process, one of which draws charts as PNG images. The image goes to the model "
                 "and shows in the cell."},
    {"code": "Draw a bar chart of the stock value of each item.",
     "answers": ["Allow once"],
     "replies": [
         {"text": "The value of each item is price × quantity: bolt 25.0, gear 9.0, motor 30.0.",
          "tool_calls": [{"id": "call_plot", "name": "plot",
                          "arguments": {"values": [25.0, 9.0, 30.0], "labels": ["bolt", "gear", "motor"],
                                        "title": "stock value per item", "kind": "bar", "width": 360,
                                        "height": 200, "color": "#1e78c8"}}]},
         {"text": "Here it is, bars in the order bolt, gear, motor. The **motor** is the single most valuable "
                  "line (30.0 of 64.0, almost half), even though there is only one of it; the 100 bolts come "
                  "second at 25.0."},
     ]},
    {"markdown": "Back to the tests, which ran in the background all this time:"},
    {"code": "Read the job's log. Did everything pass?",
     "replies": [
         # The wait and the read are two steps: calls in one step may run at once (read-only
         # calls run concurrently), and a log read beside the wait could find the job mid-run.
         {"text": "I'll wait for the run to finish, then read its log.",
          "tool_calls": [{"id": "call_wait", "name": "bash_status", "arguments": {"job_id": "j1", "wait_seconds": 60}}]},
         {"text": "It has finished; here is the log.",
          "tool_calls": [{"id": "call_logs", "name": "bash_logs", "arguments": {"job_id": "j1"}}]},
         {"text": "No. The job finished and **1 of 2 tests failed**:\n\n"
                  "- `test_low_stock` passes.\n"
                  "- `test_total_value` fails: it expects **64.0**, but `total_value(STOCK)` returns **34.75**.\n\n"
                  "34.75 is 0.25 + 4.5 + 30.0, the sum of the unit prices, so the quantities are ignored, "
                  "just as the code suggested."},
     ]},
    {"code": "/logs j1"},
    {"markdown": "## Questions and approvals\n\nWhen a choice is yours, the agent asks with a form in the cell. "
                 "In the default approval mode every change to a file and every command waits for your "
                 "*Allow once*, *Allow for session* or *Deny* (`/approval` changes the mode)."},
    {"code": "Fix it. If there is more than one reasonable fix, ask me first.",
     "answers": ["Fix the code", "Allow once", "Allow once"],
     "replies": [
         {"text": "There are two ways to make this test pass and they mean different things, so I'll ask.",
          "tool_calls": [{"id": "call_ask", "name": "question", "arguments": {"questions": [WHICH_FIX]}}]},
         {"text": "Fixing the code: the stock value is price × quantity.",
          "tool_calls": [{"id": "call_edit", "name": "edit",
                          "arguments": {"path": "inventory.py", "old_string": OLD, "new_string": NEW}}]},
         {"text": "Now the tests again.",
          "tool_calls": [{"id": "call_test", "name": "bash",
                          "arguments": {"command": "python3 -m unittest -v 2>&1 | tail -4"}}]},
         {"text": "Both tests pass.\n\n**The cause:** `total_value` summed `item.price` and ignored "
                  "`item.quantity`, so 100 bolts counted as one.\n**The fix:** one line in `inventory.py`, "
                  "`total += item.price * item.quantity`. The expected total checks out: "
                  "100 × 0.25 + 2 × 4.5 + 1 × 30.0 = 64.0."},
     ]},
    {"markdown": "## Plan mode\n\nIn Plan mode the agent reads and plans but cannot edit files or run commands; "
                 "its plan becomes the session's todo list. `/mode work` switches back, and the todos stay."},
    {"code": "/mode plan"},
    {"code": "Plan how to add a CSV export of the inventory. Don't change anything yet.",
     "replies": [
         {"text": "Let me check whether anything in the project already writes files.",
          "tool_calls": [{"id": "call_grep", "name": "grep", "arguments": {"pattern": "import|open\\(|csv"}}]},
         {"text": "Nothing does yet; `inventory.py` only imports `dataclass`. I'll write the plan as todos.",
          "tool_calls": [{"id": "call_todos", "name": "todowrite", "arguments": {"todos": PLAN_TODOS}}]},
         {"text": "The plan (all steps pending, nothing changed):\n\n"
                  "1. **`export_csv(items, path)`** in `inventory.py`, with the standard `csv` module: one row "
                  "per item with `name`, `price`, `quantity` and `value`.\n"
                  "2. A header row, and `value` rounded to cents so it agrees with `total_value`.\n"
                  "3. **`test_export_csv`**: export `STOCK` to a temporary file and read it back.\n"
                  "4. A line in `README.md`.\n\n"
                  "Open question: should `value` be written at all, or computed by whoever reads the file? "
                  "I assumed it is written, since that is what people open a CSV for. Switch to Work mode "
                  "and I'll work through the list."},
     ]},
    {"code": "/todos"},
    {"code": "/mode work"},
    {"markdown": "## Where next\n\n"
                 "- Connect a real model: `docs/models.md` (OpenAI, Anthropic, or a local server through `baseUrl`).\n"
                 "- The kernel, its cells and its flags: `docs/kernel.md`; every slash command: `docs/commands.md`.\n"
                 "- Record your own sessions and replay them: `docs/recording.md`."},
]

# ----- the magics tour (a Python notebook) -------------------------------------------------------------

SALES = '''import pandas as pd

sales = pd.DataFrame({
    "month": ["Jan", "Feb", "Mar", "Apr", "May", "Jun"] * 2,
    "region": ["North"] * 6 + ["South"] * 6,
    "revenue": [120, 135, 150, 149, 170, 188, 90, 94, 101, 125, 140, 162],
})
sales.head(3)'''

GROWTH = '''first, last = sales[sales.month == "Jan"], sales[sales.month == "Jun"]
growth = (last.set_index("region").revenue / first.set_index("region").revenue - 1).mul(100).round(1)
growth'''

PLOT = '''import matplotlib.pyplot as plt

months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun"]
by_region = sales.pivot(index="month", columns="region", values="revenue").loc[months]
ax = by_region.plot(marker="o", figsize=(6, 3.2), title="Monthly revenue per region")
ax.set_xlabel("")
ax.set_ylabel("revenue (k€)")
ax.grid(alpha=0.3)
plt.tight_layout()
plt.show()'''

MAGICS: list[dict[str, Any]] = [
    {"markdown": "# Crystal in a Python notebook\n\n"
                 "You don't need the Crystal kernel to use the agent: in any Python notebook, "
                 "`%load_ext crystal_kernel` adds the `%crystal` and `%%crystal` magics. The agent then works "
                 "*with* the notebook: `{name}` puts a variable's value into the prompt, and the `python` tool "
                 "runs code in this very namespace, so what the agent computes is yours to use afterwards.\n\n"
                 "`make demo` replays recorded model replies (no key, no network); the code the agent writes "
                 "really runs in this kernel."},
    {"code": "%load_ext crystal_kernel"},
    {"markdown": "Some data to talk about:"},
    {"code": SALES},
    {"markdown": "## A task with `{var}` and the python tool\n\nThe agent runs Python here after you allow it "
                 "(during `make demo`, the recorded person's *Allow once*)."},
    {"code": "%%crystal\nHere is the monthly revenue by region:\n\n{sales}\n\n"
             "Which region grew faster from January to June? Plot the monthly revenue of both regions.",
     "answers": ["Allow once", "Allow once"],
     "replies": [
         {"text": "I'll compute the growth from `sales` in your notebook.",
          "tool_calls": [{"id": "call_growth", "name": "python", "arguments": {"code": GROWTH}}]},
         {"text": "Now the chart.",
          "tool_calls": [{"id": "call_plot", "name": "python", "arguments": {"code": PLOT}}]},
         {"text": "**South grew faster**: from 90 to 162, **+80.0%**, against North's 120 to 188, "
                  "**+56.7%**. North still sells more every month, but the gap shrank from 30 to 26, and South "
                  "picked up from April on (101 → 125), while North stalled in April (150 → 149).\n\n"
                  "The growth figures are in the variable `growth` in your notebook."},
     ]},
    {"markdown": "What the agent computed is an ordinary variable now:"},
    {"code": "growth"},
    {"markdown": "## The synchronous form\n\n`x = %crystal …` returns the answer's text, for use in code "
                 "(no forms or approvals in this form)."},
    {"code": "headline = %crystal In one short sentence for a slide: how did the regions do?\nprint(headline)",
     "replies": [
         {"text": "South grew 80% from January to June, outpacing North's 57%, though North still leads "
                  "in revenue."},
     ]},
    {"code": "%crystal /usage"},
]

# ----- the notebook tools tour (a Crystal notebook working on a Python notebook) ---------------------

# examples/analysis-notebook/analysis.ipynb: cell ids are fixed so the scripted replies can name them.
ANALYSIS_CELLS = [
    ("intro", "markdown", "# Q1 sales\n\nRevenue per region from `sales.csv`, and each region's share."),
    ("load", "code", 'import pandas as pd\n\nsales = pd.read_csv("sales.csv")\n'
                     'sales["revenue"] = sales.units * sales.unit_price\nsales.head(3)'),
    ("totals", "code", 'totals = sales.groupby("region").revenue.sum()\ntotals'),
    ("share", "code", "share = (revenue_by_region / revenue_by_region.sum() * 100).round(1)\nshare"),
]
SHARE_FIX = "share = (totals / totals.sum() * 100).round(1)\nshare"

NOTEBOOK_TOOLS: list[dict[str, Any]] = [
    {"markdown": "# Notebook tools\n\n"
                 "Notebooks are first-class files for the agent: `read` shows a notebook as numbered cells with "
                 "their outputs (errors as `ename: evalue` and a short traceback, no JSON), `notebook_edit` "
                 "changes cells by id, and `notebook_run` runs the notebook headless in a fresh kernel of its own "
                 "kernelspec and writes the outputs back.\n\n"
                 "This folder holds `analysis.ipynb`, a small pandas analysis whose last cell fails. "
                 "`make demo` replays the model's recorded replies; the reading, the edit and the run really "
                 "happen, on `analysis.ipynb` in this folder (open it after the cell below has run)."},
    {"code": "analysis.ipynb stops with an error. Find out why, fix the cell and re-run the notebook.",
     "answers": ["Allow once", "Allow once"],
     "replies": [
         {"text": "I'll read the notebook with its outputs.",
          "tool_calls": [{"id": "call_read_nb", "name": "read", "arguments": {"path": "analysis.ipynb"}}]},
         {"text": "Cell 4 (`share`) fails with `NameError: name 'revenue_by_region' is not defined`: cell 3 "
                  "stores the per-region revenue as `totals`, so cell 4 names a variable that never existed. "
                  "I'll point it at `totals`.",
          "tool_calls": [{"id": "call_fix", "name": "notebook_edit", "arguments": {
              "path": "analysis.ipynb", "action": "replace", "cell_id": "share", "source": SHARE_FIX}}]},
         {"text": "Now I'll re-run the notebook in a fresh kernel to check the whole analysis.",
          "tool_calls": [{"id": "call_run", "name": "notebook_run", "arguments": {
              "path": "analysis.ipynb", "timeout_seconds": 120}}]},
         {"text": "Fixed. Cell 4 used `revenue_by_region`, which no cell defines; the totals are in `totals` "
                  "(cell 3). After the change every cell runs in a fresh kernel and the outputs are saved in "
                  "`analysis.ipynb`:\n\n| region | revenue | share |\n| --- | --- | --- |\n"
                  "| North | 3,772.50 | 58.7% |\n| South | 2,657.00 | 41.3% |"},
     ]},
    {"markdown": "The fix is in the file: open `analysis.ipynb` to see the corrected cell and its fresh outputs. "
                 "In Work mode `notebook_edit` is a workspace write and `notebook_run` runs code, so both asked "
                 "for approval; the approval form showed the cell's diff (here the recording answered)."},
    {"code": "Add a one-line Markdown conclusion at the end of analysis.ipynb.",
     "answers": ["Allow once"],
     "replies": [
         {"tool_calls": [{"id": "call_note", "name": "notebook_edit", "arguments": {
             "path": "analysis.ipynb", "action": "insert", "cell_type": "markdown",
             "source": "**North leads Q1 with 58.7% of revenue; South has 41.3%.**"}}]},
         {"text": "Added the conclusion as the last cell of `analysis.ipynb`."},
     ]},
]


# ----- the workbench tour (your own %%python cells beside the agent, in a Crystal notebook) -----------

ORDERS = """%%python
import pandas as pd

orders = pd.DataFrame({
    "customer": ["Ana", "Ben", "Ana", "Cleo", "Ben", "Ana"],
    "qty": [2, 1, 3, 5, 2, 1],
    "price": [12.0, 30.0, 12.0, 4.5, 30.0, 12.0],
})
orders"""

RANKING = """ranking = (orders.assign(total=orders.qty * orders.price)
           .groupby("customer").total.sum()
           .sort_values(ascending=False))
ranking"""

CHART = """%%python
ax = ranking.plot.bar(title="Spent per customer (EUR)", figsize=(4, 2.6), rot=0, color="#3b7dd8")
ax.set_xlabel("")
ax.figure.tight_layout()"""

WORKBENCH: list[dict[str, Any]] = [
    {"markdown": "# Your Python beside the agent\n\n"
                 "In a Crystal notebook a cell is a prompt, unless its first line is `%%python`: then it is your "
                 "own Python, run in the kernel's namespace, the one the agent's `python`, `variables` and "
                 "`cell_output` tools use. What you make there the agent can read, what the agent computes is "
                 "yours, and the next turn is told which `%%python` cells you ran since the last one and how "
                 "they ended.\n\n"
                 "In JupyterLab two more things help: *Insert* on a code block of an answer makes a runnable "
                 "`%%python` cell, and a failing cell's error has a *Fix with Crystal* button that proposes the "
                 "change as a diff to apply (in Python notebooks too). Inline completions (ghost text, Tab "
                 "accepts) come from the same model when `inlineCompletion` is on.\n\n"
                 "`make demo` replays recorded model replies (no key, no network); every `%%python` cell and the "
                 "agent's Python really run in this kernel."},
    {"code": ORDERS},
    {"code": "Which customer spent the most? Keep the ranking in a variable I can use.",
     "answers": ["Allow once"],
     "replies": [
         {"text": "I'll see what your namespace holds.",
          "tool_calls": [{"id": "call_vars", "name": "variables", "arguments": {}}]},
         {"text": "`orders` has a quantity and a unit price per line; I'll total them per customer.",
          "tool_calls": [{"id": "call_rank", "name": "python", "arguments": {"code": RANKING}}]},
         {"text": "**Ben** spent the most, **90.00**, then Ana 72.00 and Cleo 22.50 (quantity × price, "
                  "summed per customer). The ranking is the variable `ranking` in this kernel:\n\n"
                  "```python\n" + RANKING + "\n```"},
     ]},
    {"markdown": "`ranking` is an ordinary variable of this kernel now. A `%%python` cell of your own uses it "
                 "(in JupyterLab, *Insert* on the answer's code block makes such a cell):"},
    {"code": CHART},
    {"markdown": "The agent was not asked about that cell, but the next turn is told about it:"},
    {"code": "Say in one sentence what the chart I just made shows.",
     "replies": [
         {"text": "Your bar chart of `ranking` shows Ben ahead at 90, Ana close behind at 72, and Cleo far "
                  "below at 22.50."},
     ]},
]


def write_analysis_example() -> Path:
    """examples/analysis-notebook/analysis.ipynb, executed for real (its last cell fails)."""
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

    folder = HERE.parent / "examples" / "analysis-notebook"
    nb = new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)",
                                               "language": "python"},
                                "language_info": {"name": "python"}})
    for cell_id, kind, source in ANALYSIS_CELLS:
        cell = new_markdown_cell(source) if kind == "markdown" else new_code_cell(source)
        cell.id = cell_id
        nb.cells.append(cell)
    path = folder / "analysis.ipynb"
    nbformat.write(nb, path)
    with tempfile.TemporaryDirectory() as tmp:
        kernels = write_kernelspec(Path(tmp) / "kernels")
        execute(path, tour_env(Path(tmp) / "home"), kernels)
    kernel_log(path).unlink(missing_ok=True)
    return path


TOURS = {"tour": (TOUR, "crystal"), "magics": (MAGICS, "python3"),
         "notebook-tools": (NOTEBOOK_TOOLS, "crystal"), "workbench": (WORKBENCH, "crystal")}

TOPIC = {"tour": "Tour of the inventory project", "magics": "Regional revenue growth",
         "notebook-tools": "Fixing the Q1 sales notebook", "workbench": "Top customers by spend"}


def write_notebook(name: str, cells: list[dict[str, Any]], kernel: str) -> Path:
    """``notebooks/<name>.ipynb`` from the script (no outputs)."""
    spec = ({"name": "crystal", "display_name": "Crystal", "language": "markdown"} if kernel == "crystal"
            else {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"})
    language = ({"name": "markdown"} if kernel == "crystal" else {"name": "python"})
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": spec, "language_info": language})
    for n, cell in enumerate(cells):
        if "markdown" in cell:
            nb.cells.append(nbformat.v4.new_markdown_cell(cell["markdown"], id=f"{name}-{n:02d}"))
        else:
            nb.cells.append(nbformat.v4.new_code_cell(cell["code"], id=f"{name}-{n:02d}"))
    path = HERE / f"{name}.ipynb"
    nbformat.write(nb, path)
    return path


def replies_of(cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The scripted replies in order, with token counts that grow like a real session's."""
    out = []
    context = 4200
    for cell in cells:
        for reply in cell.get("replies", []):
            words = len(str(reply.get("text", "")).split()) + 40 * len(reply.get("tool_calls", []))
            reply = dict(reply, usage={"input_tokens": context, "output_tokens": 12 + int(words * 1.4)})
            out.append(reply)
            context += 380 + int(words * 1.4)
    return out


def record(name: str) -> int:
    cells, kernel = TOURS[name]
    if name == "notebook-tools":
        write_analysis_example()
    source = write_notebook(name, cells, kernel)
    t = tour(name)
    # Next to this script (a copy of the folder records into itself).
    cassette = HERE / "cassettes" / f"{name}.json"
    cassette.parent.mkdir(parents=True, exist_ok=True)
    if cassette.exists():
        cassette.unlink()
    topic = {"text": TOPIC[name], "usage": {"input_tokens": 900, "output_tokens": 8}}

    def router(body: dict[str, Any], path: str) -> dict[str, Any] | None:
        system = str((body.get("messages") or [{}])[0].get("content", ""))
        return topic if "You name conversations" in system else None

    answers = [a for cell in cells for a in cell.get("answers", [])]
    with tempfile.TemporaryDirectory() as tmp, LLMServer(replies_of(cells), router=router) as server:
        home = write_home(Path(tmp) / "home", {
            "provider": "openai", "model": MODEL, "baseUrl": server.base_url, "apiKeyEnv": KEY_ENV,
            "record": True, "cassette": str(cassette)})
        notebook = prepare(t, Path(tmp) / name, cassette=False)
        shutil.copy2(source, notebook)
        # The person recording trusts the tour's own exec tool set (TRUST-2), as `make demo`
        # does: untrusted, its tools (the tour's plot) are not offered, no approval is asked
        # for them, and the scripted answers then wait for a form that never comes.
        trust_all(home, notebook.parent)
        kernels = write_kernelspec(Path(tmp) / "kernels")
        clicked: list[str] = []
        try:
            nb = execute(notebook, tour_env(home, {KEY_ENV: "recording"}), kernels, answers=answers,
                         clicked=clicked)
            problems = error_outputs(nb)
        except CellTimeoutError as exc:  # a form waited for an answer the script never gave
            problems = [str(exc).splitlines()[0]]
        if clicked != answers:
            problems.append(f"the scripted person clicked {clicked}, not {answers}")
        if server.pending:
            problems.append(f"{server.pending} scripted replies were never asked for")
    for problem in problems:
        print(f"{name}: {problem}", file=sys.stderr)
    print(f"{name}: recorded {cassette}")
    return 1 if problems else 0


def main(argv: list[str]) -> int:
    names = argv or list(TOURS)
    return max(record(name) for name in names)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
