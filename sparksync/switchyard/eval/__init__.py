"""The Switchyard eval: a tool-use case file played against the gateway and each pool alone."""
