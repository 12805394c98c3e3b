"""Base handler of the Crystal REST API: authentication, JSON errors, the workspace.

Every handler is ``@web.authenticated`` (an API request without a valid token or
cookie gets 403, never a login redirect). A person's bad input is a 400 with a JSON
body ``{"error": "one English line"}``; a missing thing is a 404 with the same shape.
The workspace is the server's root folder, or a folder inside it named by the
``workspace`` query argument; without one, lists cover the root and the Crystal folders
below it (server/workspaces.py) and a session or job is looked up in them. Nothing
outside the root is ever read or written.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from jupyter_server.base.handlers import APIHandler
from tornado import web

from crystal_kernel.core import paths
from crystal_kernel.core.errors import UserError
from crystal_kernel.core.paths import home_dir
from crystal_kernel.jupyter.server.ids import ID_PATTERN, NotFound, check_id, inside

__all__ = ["ID_PATTERN", "MAX_BODY", "CrystalHandler", "NotFound", "check_id", "inside"]

MAX_BODY = 64 * 1024


class CrystalHandler(APIHandler):
    """JSON in, JSON out, errors as ``{"error": ...}``."""

    @property
    def root(self) -> Path:
        root = self.settings.get("server_root_dir") or os.getcwd()
        return Path(os.path.realpath(os.path.expanduser(root)))

    @property
    def home(self) -> Path:
        return home_dir()

    def kernel_homes(self) -> list[Path]:
        """The Crystal Homes of the kernels this server starts (server/signed.py): each
        Crystal kernelspec's ``env`` ``CRYSTAL_HOME`` (``~`` and ``$VARS`` expanded from
        the server's environment, as the kernel's would be), else this server's own Home,
        which the kernel inherits."""
        homes: list[Path] = []
        manager = self.settings.get("kernel_spec_manager")
        if manager is None:
            return [self.home]
        try:
            names = list(manager.find_kernel_specs())
        except Exception:
            names = []
        for name in names:
            try:
                spec = manager.get_kernel_spec(name)
            except Exception:
                continue  # a broken kernelspec: not Crystal's to judge
            if not (name == "crystal" or (getattr(spec, "metadata", None) or {}).get("crystal")):
                continue
            env = getattr(spec, "env", None) or {}
            raw = env.get("CRYSTAL_HOME") if isinstance(env, dict) else None
            home = Path(os.path.expanduser(os.path.expandvars(raw))) if isinstance(raw, str) and raw else self.home
            if home not in homes:
                homes.append(home)
        return homes or [self.home]

    def workspace(self) -> Path:
        """The server root, or ``?workspace=relative/folder`` inside it."""
        rel = self.get_argument("workspace", "") or ""
        if not rel or rel in (".", "/"):
            return self.root
        if "\x00" in rel or os.path.isabs(rel):
            raise UserError("'workspace' must be a folder relative to the server's root.")
        folder = inside(self.root, self.root / rel)
        if not folder.is_dir():
            raise UserError(f"'{rel}' is not a folder under the server's root.")
        return folder

    def workspaces(self) -> list[Path]:
        """``?workspace=`` when given, else the root and the Crystal folders under it
        (server/workspaces.py: bounded, no symlinks)."""
        from crystal_kernel.jupyter.server.workspaces import find_workspaces

        if self.get_argument("workspace", ""):
            return [self.workspace()]
        return find_workspaces(self.root)

    def workspace_with(self, relative_file: str) -> Path:
        """The workspace holding ``relative_file`` (e.g. ``.crystal/sessions/<id>.json``):
        the explicit ``?workspace=`` or the first found that has it, else the root."""
        for folder in self.workspaces():
            if (folder / relative_file).exists():
                return folder
        return self.workspace()

    def session_workspace(self, session_id: str) -> Path:
        """The workspace that holds session ``session_id`` (its id checked first)."""
        check_id(session_id, "session")
        # A journal (<id>.jsonl), or a session still in the older single-document format.
        sessions = paths.sessions_dir(".").as_posix()
        for name in (f"{sessions}/{session_id}.jsonl", f"{sessions}/{session_id}.json"):
            found = self.workspace_with(name)
            if (found / name).exists():
                return found
        return self.workspace()

    def job_workspace(self, session_id: str, job_id: str) -> Path:
        """The workspace that holds job ``job_id`` of session ``session_id``."""
        check_id(session_id, "session")
        check_id(job_id, "job")
        folder = paths.job_dir(".", session_id).as_posix()
        for name in (f"{folder}/{job_id}.json", f"{folder}/{job_id}.log"):
            found = self.workspace_with(name)
            if (found / name).exists():
                return found
        return self.workspace()

    def int_argument(self, name: str, default: int, minimum: int = 0, maximum: int | None = None) -> int:
        raw = self.get_argument(name, None)
        if raw is None or raw == "":
            return default
        try:
            value = int(raw)
        except ValueError:
            raise UserError(f"'{name}' must be a whole number, not '{raw[:40]}'.") from None
        if value < minimum:
            raise UserError(f"'{name}' must be at least {minimum}.")
        if maximum is not None and value > maximum:
            raise UserError(f"'{name}' must be at most {maximum}.")
        return value

    def json_body(self) -> dict[str, Any]:
        body = self.request.body or b""
        if len(body) > MAX_BODY:
            raise UserError(f"The request body is larger than {MAX_BODY // 1024} KiB.")
        try:
            data = json.loads(body.decode("utf-8") or "null")
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise UserError("The request body is not valid JSON.") from None
        if not isinstance(data, dict):
            raise UserError("The request body must be a JSON object.")
        return data

    def reply(self, data: Any, status: int = 200) -> None:
        self.set_status(status)
        self.finish(json.dumps(data, ensure_ascii=False))

    def fail(self, status: int, message: str) -> None:
        self.set_status(status)
        self.finish(json.dumps({"error": message}))

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        """Tornado errors (403 from @authenticated, 405, 500) as ``{"error": ...}``."""
        self.set_header("Content-Type", "application/json")
        message = self._reason or "Error"
        exc = kwargs.get("exc_info", (None, None, None))[1]
        if isinstance(exc, web.HTTPError) and exc.log_message:
            message = exc.log_message % exc.args if exc.args else exc.log_message
        elif status_code >= 500:
            message = "The Crystal server extension failed; see the server log."
        self.finish(json.dumps({"error": message}))

    async def guarded(self, action: Any, *args: Any) -> None:
        """Run ``action`` and turn UserError into 400 and NotFound into 404."""
        try:
            result = action(*args)
            if hasattr(result, "__await__"):
                result = await result
        except UserError as exc:
            self.fail(400, str(exc))
            return
        except NotFound as exc:
            self.fail(404, str(exc))
            return
        self.reply(result)
