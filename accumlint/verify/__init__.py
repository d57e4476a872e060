"""Runtime verifier: imports torch, only on request."""
