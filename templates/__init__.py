"""Jinja templates tritongen renders (shipped in the wheel as ``tritongen.templates``)."""
