"""What several log formats share: the parser contract, line templates, the big-log pre-pass, readers."""
