"""Source models: load them and describe their inputs and outputs as a signature."""
