"""Adapters implement the ports in shared.contract.ports, one package per runtime."""
