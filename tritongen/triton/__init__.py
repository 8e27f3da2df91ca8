"""Triton's side: the typed model config, its rendering and schema check, repository layout."""
