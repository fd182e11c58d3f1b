"""Adapters implement the ports in shared.ports, one package per runtime."""
