"""``python -m crystal_kernel.jupyter -f CONNECTION_FILE [crystal flags]`` starts the kernel.

Jupyter starts a kernel in the notebook's folder, and ``python -m`` puts that folder
first on ``sys.path``: a cloned repository's ``traitlets.py`` or ``pluggy.py`` would be
imported instead of the installed package, code run before the person trusted anything
(TRUST-2). The folder is taken off ``sys.path`` before anything else is imported, as
``ipykernel_launcher`` does; the kernel keeps it off (``ignore_cwd``, kernel.py).
"""

import os
import sys

if __name__ == "__main__":
    if sys.path and (sys.path[0] in ("", ".") or os.path.realpath(sys.path[0]) == os.path.realpath(os.getcwd())):
        del sys.path[0]

    from crystal_kernel.jupyter.kernel import main

    main()
