"""The pure logic of ``tritongen tune``: search space, objective and search strategies (no server)."""
