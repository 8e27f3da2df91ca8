"""Tables, JSON/CSV, plots and HTML built from results."""
