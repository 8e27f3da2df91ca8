"""Workflow: a source model to verified, configured model directories published into a repository."""
