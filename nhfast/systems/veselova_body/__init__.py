"""nhfast/systems/veselova."""
