"""Wharf package."""
