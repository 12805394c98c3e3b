"""`python -m crystal_kernel.cli`: the `crystal` command."""

import sys

from crystal_kernel.cli import main

sys.exit(main())
