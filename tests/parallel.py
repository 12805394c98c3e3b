"""How `make test` spreads the suite over pytest-xdist workers (docs/contributing.md).

Most tests wait on child processes and I/O, so more workers than cores pay. Each worker
takes whole *groups*, one at a time, in the order below:

- a test module is a group, so its module fixtures (a server, a kernel) start once;
- ``tests/jupyter`` and ``tests/magics`` are one group each: their modules share one
  kernel (crystal_kernel/testing/folder_shared.py), which a worker starts once for the
  folder and stops after its last test;
- ``tests/e2e`` is a few groups (:data:`E2E_GROUPS`), each run on one worker, one browser
  test at a time. The modules on the plain ``lab`` fixture share one ``jupyter lab``
  (tests/e2e/conftest.py), started once by each worker that runs one of their groups.
  They are three groups because as one (with the modules now in "tests/e2e/person") they
  took the whole parallel part, ~13 minutes in CI, while a lab start costs ~13 s (~8 s
  of CPU) at load 6. The modules that start labs of their own make three more groups.

The groups are handed out longest first (:data:`FIRST`): a long group that starts late is
the run's tail, and groups of minutes go out before those of seconds. Tests marked
``serial`` are not run by the workers: `make test` runs them afterwards in one process,
alone on the machine (crystal_kernel/testing/run_tests.py).
"""

from __future__ import annotations

from typing import Any

from xdist.scheduler import LoadScopeScheduling

#: Folders whose modules share one process started by the folder's conftest.
FOLDER_GROUPS = ("tests/jupyter/", "tests/magics/")
#: The groups of tests/e2e other than "tests/e2e/" (the rest of its modules, which share
#: a lab), and their modules. Times are from a CI run of the whole suite on two cores.
E2E_GROUPS: dict[str, tuple[str, ...]] = {
    # On the shared lab: the forms at a person's pace, reloads and the headless grace (~4 min).
    "tests/e2e/forms": ("tests/e2e/test_forms.py",),
    # On the shared lab: how answers stream and read, light and dark (~4 min).
    "tests/e2e/rendering": ("tests/e2e/test_streaming.py", "tests/e2e/test_polish.py",
                            "tests/e2e/test_render_safety.py", "tests/e2e/test_sessions_sidebar.py"),
    # Labs of their own: the notebook walk through Kernel Gateway, then Enterprise Gateway (~4.5 min).
    "tests/e2e/gateway": ("tests/e2e/test_gateway.py",),
    # Labs of their own: real-time collaboration, Notebook 7, Jupyter AI (~2 min).
    "tests/e2e/own-lab": ("tests/e2e/test_live_notebook_edit.py",
                          "tests/e2e/test_notebook7.py", "tests/e2e/test_jupyter_ai.py",
                          # Inline completions: the server extension calls the model (~1 min).
                          "tests/e2e/test_inline_completion.py",
                          # A shared (real-time collaboration) lab of its own, reloaded mid-turn.
                          "tests/e2e/test_reload_rtc.py"),
    # Labs of their own: a person's whole session (~2.5 min), `crystal space` (~1 min).
    "tests/e2e/person": ("tests/e2e/test_person_session.py", "tests/e2e/test_space.py"),
}
#: tests/docs/test_docs_commands.py runs each page's commands in a shell of its own (a
#: sandbox each, the module's loopback model server in-process): as one group the pages
#: took ~12 minutes under the parallel part's load, the run's tail. Its heaviest pages
#: make two more groups (~4 min each); the rest stay in the module's group.
DOCS_COMMANDS = "tests/docs/test_docs_commands.py"
DOCS_PAGE_GROUPS: dict[str, tuple[str, ...]] = {
    # Real kernels: the tours re-recorded (recording.md), JupyterLab and kernel commands.
    f"{DOCS_COMMANDS}::jupyterlab": ("docs/jupyterlab.md", "docs/recording.md", "docs/kernel.md", "docs/prompts.md"),
    # A Kernel Gateway's and Jupyter Server's options, MCP servers, the install steps.
    f"{DOCS_COMMANDS}::deploy": ("docs/deploy.md", "docs/mcp.md", "docs/install.md"),
}
_DOCS_GROUP_OF = {page: group for group, pages in DOCS_PAGE_GROUPS.items() for page in pages}
#: The groups whose modules start labs of their own (the others use the shared lab).
OWN_LAB_GROUPS = ("tests/e2e/own-lab", "tests/e2e/person", "tests/e2e/gateway")
_E2E_GROUP_OF = {module: group for group, modules in E2E_GROUPS.items() for module in modules}
#: Groups handed out before all others, in this order: about longest first (times from a
#: CI run on two cores), the browser groups spread so that about three run at once (the
#: first six groups start together, the next ones as workers free up). Every other
#: group follows, in collection order.
FIRST = (
    "tests/docs/test_docs_commands.py",        # ~4.5 min under load (its heaviest pages: DOCS_PAGE_GROUPS)
    "tests/jupyter/",                          # ~4.5 min
    "tests/e2e/rendering",                     # ~4 min
    "tests/e2e/forms",                         # ~4 min
    "tests/mcp/test_mcp_http.py",              # ~2.5 min
    "tests/magics/",                           # ~1 min: its worker then takes the next browser group
    "tests/docs/test_docs_commands.py::jupyterlab",  # ~4 min under load
    "tests/e2e/person",                        # ~3.5 min
    "tests/mcp/test_mcp_cli.py",               # ~2.5 min
    "tests/docs/test_docs_commands.py::deploy",  # ~3.5 min under load
    "tests/e2e/gateway",                       # ~4.5 min
    "tests/e2e/own-lab",                       # ~2 min
    "tests/e2e/",                              # ~3 min
    "tests/acp/test_acp_agent.py",             # then the modules of a minute or two
    "tests/cli/test_interactive.py",
    "tests/demo/test_demo.py",
    "tests/cli/test_startup.py",
    "tests/acp/test_acp_reasoning.py",
    "tests/security/test_trust6_terminal.py",
    "tests/exec/test_tools_cli.py",
    "tests/testing/test_run_tests.py",
    "tests/security/test_stream_bounds.py",
    "tests/mcp/test_mcp_stdio.py",
    "tests/acp/test_acp_stdio.py",
    "tests/host/test_events_exhaustive.py",
    "tests/reliability/test_journal_crash.py",
    "tests/reliability/test_kernel_faults.py",
)


def group_of(nodeid: str) -> str:
    """The group of the test ``nodeid`` (a path relative to the repository root)."""
    path = nodeid.split("::", 1)[0]
    if path == DOCS_COMMANDS and nodeid.endswith("]"):
        return _DOCS_GROUP_OF.get(nodeid[nodeid.index("[") + 1:-1], path)
    if path.startswith("tests/e2e/"):
        return _E2E_GROUP_OF.get(path, "tests/e2e/")
    for folder in FOLDER_GROUPS:
        if path.startswith(folder):
            return folder
    return path


def rank(nodeid: str) -> int:
    """Where the test's group comes in the order the workers take groups."""
    group = group_of(nodeid)
    return FIRST.index(group) if group in FIRST else len(FIRST)


class GroupScheduling(LoadScopeScheduling):  # type: ignore[misc]
    """xdist's per-scope scheduling with :func:`group_of` as the scope. The groups go out
    in collection order, which tests/conftest.py sorts by :func:`rank` in the workers."""

    def _split_scope(self, nodeid: str) -> str:
        return group_of(nodeid)


def make_scheduler(config: Any, log: Any) -> GroupScheduling:
    config.option.loadscopereorder = False  # keep the order of FIRST, not the test counts
    return GroupScheduling(config, log)


#: Tests `make test` runs in its serial part, alone on the machine (marked ``serial`` at
#: collection, as a ``@pytest.mark.serial`` in the file would): each asserts a wall-clock
#: bound of a few seconds around starting processes or CPU work, which the parallel
#: part's load (more workers than cores) breaks without the code being slower. By test id
#: prefix, so a parametrized test is matched with all its cases.
SERIAL = (
    # ROBUST-3: every tool's cancel within 2 s; the session-only tools "at once" (0.5 s).
    "tests/security/test_cancel_every_tool.py::",
    "tests/security/test_cancel_notebook_tools.py::",
    "tests/security/test_tool_bounds.py::test_a_turn_in_a_slow_tool_is_cancelled_within_2_seconds",
    # A catastrophic pattern is answered within 5 s (ripgrep's own CPU time).
    "tests/security/test_grep_regex_bounds.py::",
    # Process trees stopped within 1-5 s of a timeout, a cancel or a closed stdin.
    "tests/tools/test_bash.py::test_stdin_is_closed",
    "tests/tools/test_bash.py::test_timeout_kills_whole_tree",
    "tests/tools/test_bash.py::test_term_ignoring_process_is_killed",
    "tests/tools/test_bash.py::test_background_leftovers_are_stopped_and_reported",
    "tests/tools/test_bash.py::test_detached_background_process_is_stopped_and_reported",
    "tests/jobs/test_manager.py::test_bg1_start_returns_at_once_and_output_streams",
    "tests/jobs/test_manager.py::test_bg5_stdin_is_closed",
    "tests/jobs/test_manager.py::test_bg1_stop_kills_a_grandchild_that_ignores_sigterm",
    "tests/jobs/test_manager.py::test_bg3_background_timeout",
    "tests/jobs/test_manager.py::test_bg2_close_stops_everything_and_refuses_new_jobs",
    "tests/jobs/test_tools.py::test_bg1_start_status_logs_while_running_and_after",
    "tests/jobs/test_tools.py::test_bg1_status_can_wait_for_the_job_to_end",
    "tests/exec/test_exec_process.py::test_ex15_timeout_kills_grandchild_that_ignores_sigterm",
    "tests/exec/test_exec_process.py::test_ex15_grandchild_holding_output_is_stopped_when_the_tool_exits",
    "tests/exec/test_exec_process.py::test_ex15_timeout_covers_reading_output_of_a_tool_still_running",
    "tests/mcp/test_mcp_stdio.py::test_cancelled_turn_cancels_the_call_on_the_server",
    "tests/acp/test_acp_agent.py::test_cancel_ends_the_turn_and_kills_the_running_command",
    # Retries honour retry-after, a hung stream is cancelled within 1 s, no retry without
    # a listener (bounds of 1-3 s).
    "tests/providers/test_adapters_faults.py::",
    "tests/providers/test_probe_deadline.py::test_the_probe_gives_up_on_its_deadline_in_process",
    # The streamed-answer renderer paces its updates by its own measured (real-time)
    # render cost, so under load the last live update can lag the final one.
    "tests/security/test_trust1_html.py::test_trust1_streamed_answer_updates_rebuild_only_sanitized_html",
    "tests/jupyter/test_render.py::test_stream_deltas_render_an_unclosed_fence_as_code_and_survive_other_alphabets",
    # A /jobs table cell answers within 2 s.
    "tests/jupyter/test_kernel_commands.py::test_jobs_table_with_stop_button_and_live_logs",
    # A kernel behind a gateway server: after a page reload under the parallel part's load
    # (three browser groups beside three workers starting processes on 2 cores) the
    # widgets' comms came back through the gateway's websocket after the test's 60 s, in
    # two of three runs; alone the module passes in ~50 s (docs/contributing.md).
    "tests/e2e/test_gateway.py::",
)


def is_serial(nodeid: str) -> bool:
    """Whether `make test` runs the test in its serial part (:data:`SERIAL`)."""
    return nodeid.startswith(SERIAL)
