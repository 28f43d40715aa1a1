"""The deploy rehearsal's support: the synthesised stack and its stand-in, the moto server,
the function processes and the scenario (tests/rehearsal holds the fixtures and the tests)."""
