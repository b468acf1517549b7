"""Writes the web layer, commands and the worker call: start, cancel, retry, schedules, uploads."""
