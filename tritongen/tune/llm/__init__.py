"""``tritongen tune`` of a local vLLM model: its engine settings searched against TTFT and ITL limits.

``space`` holds the candidates (engine settings the engine takes), ``measure`` one
measurement (an LLM load test's goodput and tails), ``trials`` the model's sibling that each
trial reloads, ``runner`` the tune (baseline, trials, confirmation in interleaved rounds),
``report`` its result, ``apply`` the winner written into the model's config.
"""
