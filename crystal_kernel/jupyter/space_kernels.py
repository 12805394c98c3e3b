"""The kernel manager of ``crystal space``: Crystal kernels, and only they, get the model
keys the space withdrew from its own environment (TRUST-6).

The space holds the key variables (core/secrets.py ``withdraw_keys``) so that what the
server starts besides Crystal kernels (Python kernels, terminals) and what reads the
server's ``/proc/PID/environ`` finds none. A Crystal kernel needs its key: it gets it in
the environment it is launched with, and withdraws it from its own environment once its
provider is built, as every host process does. A restart relaunches the kernel with the
same environment.
"""

from __future__ import annotations

import os
from typing import Any

from jupyter_client.kernelspec import KernelSpecManager
from jupyter_server.services.kernels.kernelmanager import AsyncMappingKernelManager

from crystal_kernel.core.secrets import held_keys


class SpaceKernelManager(AsyncMappingKernelManager):
    """jupyter_server's kernel manager, giving the held keys to Crystal kernels."""

    def is_crystal(self, kernel_name: str | None) -> bool:
        """A kernelspec the lab extension would take for Crystal (metadata ``crystal``)."""
        specs = self.kernel_spec_manager  # a traitlets Instance: typed as object
        if not isinstance(specs, KernelSpecManager):
            return False
        try:
            spec = specs.get_kernel_spec(kernel_name or self.default_kernel_name)
        except Exception:  # an unknown name: jupyter_server reports it as it always does
            return False
        return bool((spec.metadata or {}).get("crystal"))

    # jupyter_server's start_kernel is async where jupyter_client's base declares a str.
    async def start_kernel(self, *args: Any, **kwargs: Any) -> str:  # type: ignore[override]
        keys = held_keys()
        if keys and self.is_crystal(kwargs.get("kernel_name")):
            kwargs["env"] = {**(kwargs.get("env") or os.environ), **keys}
        kernel_id: str = await super().start_kernel(*args, **kwargs)
        return kernel_id
