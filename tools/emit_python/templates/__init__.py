"""The Jinja templates the generator renders (data only)."""
