"""Logs, traces, metrics and how they are shown. Imports only the contract.
"""
