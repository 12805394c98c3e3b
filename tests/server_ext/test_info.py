"""``GET info`` says whether the server's kernels run elsewhere (``--gateway-url``): the
sidebar then asks the notebook's kernel instead of this server's disk (docs/deploy.md)."""

from __future__ import annotations

import pytest

from crystal_kernel.jupyter.server.info import gateway_enabled


def test_a_server_with_local_kernels_says_gateway_false(api):
    assert api("GET", "info") == (200, {"gateway": False})


class _Gateway:
    def __init__(self, enabled: bool):
        self.gateway_enabled = enabled


@pytest.mark.parametrize("enabled", [True, False])
def test_gateway_enabled_reads_the_server_apps_gateway_config(enabled):
    app = type("App", (), {"gateway_config": _Gateway(enabled)})()
    assert gateway_enabled({"serverapp": app}) is enabled
