"""What a command asks for, done end to end: the servers and inputs it needs, the run, the verdict."""
