"""nhfast/symbolic/vakonomic."""
