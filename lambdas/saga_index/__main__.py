"""`python -m saga_index` is the operator CLI."""

from saga_index.cli.main import main

if __name__ == "__main__":
    main()
