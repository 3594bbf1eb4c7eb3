"""Renderers: each reads only the Report."""
