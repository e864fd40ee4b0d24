"""Helpers that tests in more than one folder share (no tests here); import as ``tests.support.<module>``."""
