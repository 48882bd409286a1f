"""Renderers of a report: text tables, HTML pages, JUnit XML, figures."""
