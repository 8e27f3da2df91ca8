"""Small models built in code for tests and the demo; nothing is downloaded."""
