"""Thin Lambda entry points: parse the event, call ONE domain function, return its result."""
