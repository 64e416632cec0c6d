"""nhfast/experiments."""
