"""The gobblin-py command line: thin typer commands over the library."""
