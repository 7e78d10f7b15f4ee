"""Use-cases: plain functions on a Session and the acting user, called by the API."""
