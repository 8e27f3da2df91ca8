"""Protobuf text edited in place: a syntax tree with offsets, and edits that change only what changes."""
