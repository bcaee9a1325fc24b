"""transfers."""
