"""Operating jobs from outside a run: how far behind each dataset is (`lag`)."""
