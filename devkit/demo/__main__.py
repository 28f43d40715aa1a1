"""`python -m devkit.demo` (what `make demo` runs)."""

from devkit.demo.cli import main

raise SystemExit(main())
