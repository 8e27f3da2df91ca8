"""Workflow: what a deployment needs besides the repository (docker compose, Kubernetes)."""
