"""Shipped signature files (package data; see docs/signatures.md)."""
