"""The ``tritongen`` commands, one module each, joined into one app in ``tritongen.cli.main``."""
