"""``python -m sparksync`` runs the command-line interface."""

from sparksync.cli.main import main

if __name__ == "__main__":
    main()
