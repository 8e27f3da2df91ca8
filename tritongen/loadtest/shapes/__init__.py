"""Load shapes: an open loop's sends laid out in time before the run (a ramp, stages, a trace replayed)."""
