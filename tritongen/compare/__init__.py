"""Engine comparison: build every format, measure each on one server, rank and recommend."""
