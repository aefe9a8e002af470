"""Chorus service: HTTP API, stores, CLI and client (the only package that does I/O)."""
