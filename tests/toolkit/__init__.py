"""Factories, helpers and fixtures that several test modules share (no test module imports another)."""
