"""Pytest fixtures around the test channel library (tests/channels.py)."""
