"""How well the analyzer does: corpora scored, metamorphic invariance, the signatures' own examples and lint."""
