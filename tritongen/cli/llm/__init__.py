"""What the commands do for a language model: convert it, tune its engine, compare its servers."""
