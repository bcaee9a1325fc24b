"""Serving engines behind one interface (base.ServingEngine), chosen by registry.choose."""
