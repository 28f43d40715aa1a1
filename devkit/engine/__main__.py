"""`python -m devkit.engine`: the semantics proxy's process (devkit.engine.serve)."""

from devkit.engine.serve import main

raise SystemExit(main())
