"""A stdio MCP server for the tests: `python stdio_server.py [--hang-start | --fail-start]`.
With MCP_TEST_DOWN naming a file that exists, it fails at start as --fail-start does
(a server that is down for a while, MCP-R)."""

import os
import sys
import time

if __name__ == "__main__":
    # Before the SDK import (about a second): a killed hung server has recorded itself.
    if os.environ.get("MCP_TEST_PIDFILE"):
        with open(os.environ["MCP_TEST_PIDFILE"], "a", encoding="utf-8") as handle:
            handle.write(f"{os.getpid()}\n")
    if "--hang-start" in sys.argv:  # never answers initialize
        time.sleep(3600)
    down = os.environ.get("MCP_TEST_DOWN")
    if down and os.path.exists(down):
        sys.stderr.write("down for maintenance\n")
        sys.exit(3)
    if "--fail-start" in sys.argv:
        sys.stderr.write("missing configuration: DEMO_TOKEN\n")
        sys.exit(2)
    from demo_tools import build

    build().run("stdio")
