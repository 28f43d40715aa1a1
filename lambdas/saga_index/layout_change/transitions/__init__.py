"""The moves between states: `rules` (pure: the allowed edges and the backfill each completing
move requires), `requirements` (the checks of a completing move and the first move's guard, read
from the table), `executor` (`phase set` against the store: checks, compare-and-set, history),
`settle` (a version's history item settled from STATE) and `restore`."""
