"""``python -m crystal_kernel.jupyter -f CONNECTION_FILE [crystal flags]`` starts the kernel."""

from crystal_kernel.jupyter.kernel import main

if __name__ == "__main__":
    main()
