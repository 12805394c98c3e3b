"""The Jupyter fronts: the Crystal kernel, its renderer and widgets, notebook tools.

This package is the only part of crystal_kernel that imports IPython, ipykernel,
ipywidgets or jupyter_* libraries. Importing it stays cheap: submodules import their
Jupyter dependencies themselves.
"""
