"""Readers of one producer's records wherever they appear (a training log, a journal, a paste)."""
