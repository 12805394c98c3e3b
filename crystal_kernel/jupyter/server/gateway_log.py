"""Keep the person's environment, and the model key in it, out of the server's log when
kernels run through a gateway (``--gateway-url``; docs/deploy.md, TRUST-4).

Jupyter Server's gateway client logs every kernel start at INFO with the start's
arguments, and those hold the whole environment of the server
(``GatewayKernelManager started kernel: ID, args: {... 'env': {...}}``): with a gateway,
each person's key is in their server's environment (it is sent with the start request),
so it would be in their server's log at every kernel start. The filter keeps the line
and its kernel id, without the arguments.
"""

from __future__ import annotations

import logging

#: How jupyter_server's GatewayKernelManager.start_kernel begins the line (2.x).
STARTED = "GatewayKernelManager started kernel: "
ARGS = ", args: "
HIDDEN = ", args: (not logged: they hold the server's environment)"


class HideGatewayStartArguments(logging.Filter):
    """Cut the arguments off the gateway client's "started kernel" line (the line stays)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str) and record.msg.startswith(STARTED):
            # Formatted here (an f-string today; %-style arguments if a release logs lazily).
            line, found, _ = record.getMessage().partition(ARGS)
            record.msg, record.args = (line + HIDDEN if found else line), None
        return True


def hide_gateway_start_arguments(log: logging.Logger) -> None:
    """Install the filter on the server's logger and on each of its handlers (a handler's
    filter also sees the lines of child loggers that propagate to it). Idempotent."""
    for target in (log, *log.handlers):
        if not any(isinstance(f, HideGatewayStartArguments) for f in target.filters):
            target.addFilter(HideGatewayStartArguments())
