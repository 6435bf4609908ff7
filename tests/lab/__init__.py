"""The network-namespace lab: netlab (the library) and fixtures (the pytest plugin)."""
