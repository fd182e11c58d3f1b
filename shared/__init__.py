"""ragbus common library: messages, ports, adapters, runtime and CLI."""
