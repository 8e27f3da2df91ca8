"""`tritongen lint`: Triton's model-configuration rules, checked before a server sees the repository."""
