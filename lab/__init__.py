"""The embedded lab: real services on 127.0.0.1 for the collection's tests and drills."""
