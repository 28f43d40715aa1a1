"""`python -m saga_index_cli` runs the operator CLI, like `saga-index`."""

from saga_index_cli.main import main

if __name__ == "__main__":
    main()
