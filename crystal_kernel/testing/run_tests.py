"""`make test`: run the whole suite with pytest.

Each test's name and result is printed as it finishes (``-v``), with the share of the
suite done: the suite takes minutes, and a row of dots says nothing about where it is.
pytest's exit code 5 ("no tests collected") is turned into a failure with a clear line:
a run that tested nothing must never pass.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def main(argv: list[str] | None = None) -> int:
    args = [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", *(argv or [])]
    code = subprocess.call(args, cwd=ROOT)
    if code == 5:
        print("make test: pytest collected no tests; that is a failure.", file=sys.stderr)
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
