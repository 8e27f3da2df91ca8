"""Workflow: a kustomize deployment of a repository on Kubernetes, with autoscaling and in-cluster load."""
