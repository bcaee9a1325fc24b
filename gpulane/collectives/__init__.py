"""Collectives: what each one is (sizes, busbw factors, checks), the shared harness, backends."""
