"""Which engines this node can run: binaries on PATH, Python packages, container runtimes and images."""
