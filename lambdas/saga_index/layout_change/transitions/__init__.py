"""The moves between states: `rules` (pure: the allowed edges and what each requires) and
`executor` (`phase set` against the store: checks, compare-and-set, history)."""
