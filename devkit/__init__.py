"""Local development helpers shared by component tests and the local demo."""
