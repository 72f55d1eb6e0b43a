"""Tests of the integrations (one package per integration, mirroring src/wharf/integrations)."""
