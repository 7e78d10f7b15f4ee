"""The acting user as every use-case takes it: the caller (the API's token, the dashboard's
session) holds it and hands it back unchanged, so who-may-see-what is decided here, never by
the caller reading the store."""

from __future__ import annotations

from railyard.control.store.tables import User

Actor = User
