"""Talk to a running Triton server: metadata, inputs built from it, single inferences."""
