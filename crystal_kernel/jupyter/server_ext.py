"""The Crystal jupyter_server extension: an authenticated REST API under
``<base_url>crystal/api/`` that the JupyterLab sidebar reads.

Enabled by ``etc/jupyter/jupyter_server_config.d/crystal_kernel.json`` (installed with
the package), or by ``--ServerApp.jpserver_extensions='{"crystal_kernel.jupyter.server_ext": true}'``.

Routes (all JSON; ``?workspace=DIR`` picks a folder under the server root, default the root):

- ``GET info``: ``{"gateway": bool}``, true when kernels run elsewhere (``--gateway-url``);
  the sidebar then asks the notebook's kernel instead (jupyter/sidebar_comm.py)
- ``GET sessions``, ``GET sessions/<id>``, ``GET status?session=<id>``
- ``GET jobs``, ``GET jobs/<session>/<job>/log?offset=&limit=``, ``POST jobs/<session>/<job>/stop``
- ``GET/POST promptsets``, ``GET/POST attachments``
- ``POST notebook-edit``: notebook_edit through the shared document of an open notebook
  (real-time collaboration; server/live_notebook.py)
- ``POST completion``: an inline completion, streamed as JSON lines (NB-2; server/completion.py)
"""

from __future__ import annotations

from typing import Any

from jupyter_server.utils import url_path_join

API = "crystal/api"


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": "crystal_kernel.jupyter.server_ext"}]


def handlers(base_url: str) -> list[tuple[str, Any]]:
    from crystal_kernel.jupyter.server.completion import CompletionHandler
    from crystal_kernel.jupyter.server.info import InfoHandler
    from crystal_kernel.jupyter.server.jobs import JobLogHandler, JobsHandler, JobStopHandler
    from crystal_kernel.jupyter.server.live_notebook import LiveNotebookEditHandler
    from crystal_kernel.jupyter.server.prompts import AttachmentsHandler, PromptSetsHandler
    from crystal_kernel.jupyter.server.sessions import SessionHandler, SessionsHandler, StatusHandler

    def route(*parts: str) -> str:
        return url_path_join(base_url, API, *parts)

    # Ids are matched loosely here ([^/]+) so a bad one reaches the handler and gets a
    # 400 with a clear message instead of a bare 404; the handlers check them.
    any_id = "([^/]+)"
    return [
        (route("info"), InfoHandler),
        (route("sessions"), SessionsHandler),
        (route("sessions", any_id), SessionHandler),
        (route("status"), StatusHandler),
        (route("jobs"), JobsHandler),
        (route("jobs", any_id, any_id, "log"), JobLogHandler),
        (route("jobs", any_id, any_id, "stop"), JobStopHandler),
        (route("promptsets"), PromptSetsHandler),
        (route("attachments"), AttachmentsHandler),
        (route("notebook-edit"), LiveNotebookEditHandler),
        (route("completion"), CompletionHandler),
    ]


def _load_jupyter_server_extension(serverapp: Any) -> None:
    from crystal_kernel.jupyter.server.gateway_log import hide_gateway_start_arguments

    # With --gateway-url the server would log each kernel start's environment, key included.
    hide_gateway_start_arguments(serverapp.log)
    web_app = serverapp.web_app
    try:
        routes = handlers(web_app.settings["base_url"])
    except ModuleNotFoundError as exc:
        # crystal-kernel without its dependencies in this environment (installed with
        # --no-deps next to a Jupyter that runs Crystal from elsewhere): one line on
        # every start instead of a traceback, and Jupyter starts as usual.
        serverapp.log.warning(missing_dependency_text(exc.name or str(exc)))
        return
    web_app.add_handlers(".*$", routes)
    serverapp.log.info("Crystal: REST API at %s%s/", web_app.settings["base_url"], API)


def missing_dependency_text(module: str) -> str:
    """The one line logged when the extension cannot load for a missing module."""
    return (f"Crystal: the sidebar's REST API is off: the module '{module}' that crystal-kernel needs is not "
            "installed in this Jupyter's environment (pip install crystal-kernel here, with its dependencies).")


# Older jupyter_server / notebook spelling.
load_jupyter_server_extension = _load_jupyter_server_extension
