"""TRUST-4 with ``--gateway-url``: the person's key is in their server's environment (it is
sent with every kernel start), and Jupyter Server's gateway client logs each start with
the server's whole environment. Crystal's server extension keeps the line without it
(jupyter/server/gateway_log.py); tests/e2e/test_gateway.py checks the real server's log."""

from __future__ import annotations

import inspect
import logging

from jupyter_server.gateway.managers import GatewayKernelManager

from crystal_kernel.jupyter.server.gateway_log import STARTED

SECRET = "sk-key-of-the-person"


class Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


def test_the_gateway_clients_start_line_is_the_one_filtered():
    """The line the filter looks for is the one this jupyter_server writes (a release that
    rewords it must be looked at again)."""
    source = inspect.getsource(GatewayKernelManager.start_kernel)
    assert f'f"{STARTED}{{self.kernel_id}}, args: {{kwargs}}"' in source


def test_the_start_line_keeps_the_kernel_id_not_the_environment(jp_serverapp):
    kept = Kept()
    jp_serverapp.log.addHandler(kept)
    try:
        kwargs = {"kernel_name": "crystal", "env": {"PATH": "/usr/bin", "OPENAI_API_KEY": SECRET}}
        # As GatewayKernelManager.start_kernel logs it, through the server's logger.
        jp_serverapp.log.info(f"{STARTED}k-1, args: {kwargs}")
        jp_serverapp.log.info("GatewayKernelManager started kernel: %s, args: %s", "k-2", kwargs)
        jp_serverapp.log.info("Another line naming %s", "PATH")
    finally:
        jp_serverapp.log.removeHandler(kept)
    assert kept.lines[0].startswith(f"{STARTED}k-1, args: (not logged")
    assert kept.lines[1].startswith(f"{STARTED}k-2, args: (not logged")
    assert kept.lines[2] == "Another line naming PATH"
    assert not any(SECRET in line for line in kept.lines)
