"""The commands, grouped by job; `precis.cli.app` registers them under their names."""
