"""Allow ``python -m tritongen``."""

from tritongen.cli.main import main

main()
