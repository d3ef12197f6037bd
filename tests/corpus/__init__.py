"""Generators of crafted input files, shared by the command-line and dashboard tests."""
