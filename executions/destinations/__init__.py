"""Destinations (S11, S20): their rules, outbound HTTP policy and transport, sealed credentials."""
