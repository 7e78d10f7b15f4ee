"""The server process around the composition root (`control.server`): its state and spool
directories, and a standby's wait for the store's lease. Only `control.server` imports it."""
