"""The options commands share: ``Annotated`` aliases and option groups, each declared once."""
